"""Per-queue runtime settings (pure, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from wai._flow import RateLimit, check_global_concurrency, check_kind_rate_limits
from wai._inserts import validate_queue
from wai._seconds import MAX_SECONDS, check_seconds
from wai.errors import ValidationError

__all__ = ["MAX_SECONDS", "QueueConfig", "QueueSettings", "normalize_queues"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueConfig:
    """How one worker process serves a queue.

    *concurrency* is the number of jobs of this queue running at once in the
    process; *deadline* (seconds) bounds each attempt unless the task sets its
    own; *claim_batch_size* caps how many jobs one claim takes (default: the
    free slots); *retention* (seconds) overrides how long ``completed`` jobs of
    this queue are kept before retention cleanup deletes them; *priority_aging*
    (seconds) turns on priority aging: an ``available`` job's priority number
    drops by one (down to 1) for every *priority_aging* seconds it has waited
    since ``run_at``. *dlq* turns the dead-letter queue on (True) or off (False)
    for the queue: its jobs that fail (terminal error, attempts exhausted,
    callback timeout on the last attempt) move to the ``dlq`` table; None takes
    ``start(dlq=...)``. *dlq_retention* (seconds) overrides how long its
    dead-letter entries are kept (default ``start(dlq_retention=...)``, 30 days).
    These settings are stored in the ``queues`` table when the worker starts, so
    every process (the maintenance leader, a callback receiver) applies them;
    None leaves the stored value as it is.

    Flow control, stored the same way and obeyed by every process and host (see
    ``docs/flow-control.md``): *rate_limit* (a :class:`wai.RateLimit`) caps how many
    jobs of the queue start per period, *global_concurrency* how many attempts of it
    run at once across all processes (*concurrency* stays this process's own cap), and
    *retry_holds_key* (default True) whether a job with an ordering key that waits for
    its retry keeps the later jobs of its key waiting. *kind_rate_limits* maps kinds to
    a :class:`wai.RateLimit` of their own within the queue (``{"charge":
    RateLimit(10)}``), on top of the queue's. To lift a limit at run time use
    :meth:`wai.AsyncClient.set_queue_limits` or
    :meth:`wai.AsyncClient.set_kind_rate_limit` (or ``wai queues limit``).
    """

    concurrency: int = 10
    deadline: float | None = None
    claim_batch_size: int | None = None
    dlq: bool | None = None
    rate_limit: RateLimit | None = None
    retention: float | None = None
    priority_aging: float | None = None
    dlq_retention: float | None = None
    global_concurrency: int | None = None
    retry_holds_key: bool | None = None
    kind_rate_limits: Mapping[str, RateLimit] | None = None

    def __post_init__(self) -> None:
        if (
            isinstance(self.concurrency, bool)
            or not isinstance(self.concurrency, int)
            or not 1 <= self.concurrency <= 10_000
        ):
            raise ValidationError(f"concurrency must be 1..10000, got {self.concurrency!r}")
        if self.deadline is not None:
            check_seconds(self.deadline, "deadline")
        if self.dlq is not None and not isinstance(self.dlq, bool):
            raise ValidationError(f"dlq must be True, False or None, got {self.dlq!r}")
        for name in ("retention", "priority_aging", "dlq_retention"):
            value = getattr(self, name)
            if value is not None:
                check_seconds(value, name)
        if self.rate_limit is not None and not isinstance(self.rate_limit, RateLimit):
            raise ValidationError(
                f"rate_limit must be a wai.RateLimit, e.g. RateLimit(50, per=1.0), "
                f"got {self.rate_limit!r}"
            )
        if self.global_concurrency is not None:
            check_global_concurrency(self.global_concurrency)
        if self.kind_rate_limits is not None:
            check_kind_rate_limits(self.kind_rate_limits)
        if self.retry_holds_key is not None and not isinstance(self.retry_holds_key, bool):
            raise ValidationError(
                f"retry_holds_key must be True, False or None, got {self.retry_holds_key!r}"
            )
        if self.claim_batch_size is not None and (
            isinstance(self.claim_batch_size, bool)
            or not isinstance(self.claim_batch_size, int)
            or not 1 <= self.claim_batch_size <= 10_000
        ):
            raise ValidationError(
                f"claim_batch_size must be 1..10000, got {self.claim_batch_size!r}"
            )


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """What a worker stores in the ``queues`` table for one queue (None keeps the stored value)."""

    name: str
    retention: float | None = None
    priority_aging: float | None = None
    dlq: bool | None = None
    dlq_retention: float | None = None
    rate_limit: RateLimit | None = None
    global_concurrency: int | None = None
    retry_holds_key: bool | None = None

    @property
    def empty(self) -> bool:
        """True when there is nothing to store."""
        return (
            self.retention is None
            and self.priority_aging is None
            and self.dlq is None
            and self.dlq_retention is None
            and self.rate_limit is None
            and self.global_concurrency is None
            and self.retry_holds_key is None
        )

    @classmethod
    def of(cls, name: str, config: QueueConfig, *, dlq: bool | None) -> QueueSettings:
        """The settings of ``config``; ``dlq`` is the process-wide default."""
        return cls(
            name=name,
            retention=config.retention,
            priority_aging=config.priority_aging,
            dlq=config.dlq if config.dlq is not None else dlq,
            dlq_retention=config.dlq_retention,
            rate_limit=config.rate_limit,
            global_concurrency=config.global_concurrency,
            retry_holds_key=config.retry_holds_key,
        )


def normalize_queues(
    queues: Mapping[str, int | QueueConfig] | None, registered: list[str]
) -> dict[str, QueueConfig]:
    """Validate ``{"email": 10}`` or QueueConfig values; None serves every registered queue.

    An empty mapping serves no queue (a maintenance-only process).
    """
    if queues is None:
        if not registered:
            raise ValidationError(
                "no queues to serve: register a task with @client.task(...) or pass queues"
            )
        return {q: QueueConfig() for q in registered}
    if not isinstance(queues, Mapping):
        raise ValidationError('queues must map queue names to concurrency, e.g. {"email": 10}')
    out: dict[str, QueueConfig] = {}
    for name, cfg in queues.items():
        validate_queue(name)
        out[name] = cfg if isinstance(cfg, QueueConfig) else QueueConfig(concurrency=cfg)
    return out
