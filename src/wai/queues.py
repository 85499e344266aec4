"""Per-queue runtime settings (pure, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from wai.errors import ValidationError
from wai.inserts import validate_queue

__all__ = ["QueueConfig", "normalize_queues"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueConfig:
    """How one worker process serves a queue.

    *concurrency* is the number of jobs of this queue running at once in the
    process; *deadline* (seconds) bounds each attempt unless the task sets its
    own; *claim_batch_size* caps how many jobs one claim takes (default: the
    free slots); *dlq*, *rate_limit* and *retention* are reserved for the
    dead-letter queue, rate limiting and retention cleanup.
    """

    concurrency: int = 10
    deadline: float | None = None
    claim_batch_size: int | None = None
    dlq: bool = False
    rate_limit: float | None = None
    retention: float | None = None

    def __post_init__(self) -> None:
        if (
            isinstance(self.concurrency, bool)
            or not isinstance(self.concurrency, int)
            or not 1 <= self.concurrency <= 10_000
        ):
            raise ValidationError(f"concurrency must be 1..10000, got {self.concurrency!r}")
        if self.deadline is not None and self.deadline <= 0:
            raise ValidationError(f"deadline must be > 0 seconds, got {self.deadline!r}")
        if self.claim_batch_size is not None and not 1 <= self.claim_batch_size <= 10_000:
            raise ValidationError(
                f"claim_batch_size must be 1..10000, got {self.claim_batch_size!r}"
            )


def normalize_queues(
    queues: Mapping[str, int | QueueConfig] | None, registered: list[str]
) -> dict[str, QueueConfig]:
    """Validate ``{"email": 10}`` or QueueConfig values; None serves every registered queue."""
    if queues is None:
        if not registered:
            raise ValidationError(
                "no queues to serve: register a task with @client.task(...) or pass queues"
            )
        return {q: QueueConfig() for q in registered}
    if not isinstance(queues, Mapping) or not queues:
        raise ValidationError('queues must map queue names to concurrency, e.g. {"email": 10}')
    out: dict[str, QueueConfig] = {}
    for name, cfg in queues.items():
        validate_queue(name)
        out[name] = cfg if isinstance(cfg, QueueConfig) else QueueConfig(concurrency=cfg)
    return out
