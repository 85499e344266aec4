"""Runtime timings and switches, validated once."""

from __future__ import annotations

import math
from dataclasses import dataclass

from wai._queues import MAX_SECONDS
from wai.errors import ValidationError

__all__ = ["RuntimeSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeSettings:
    """Keyword arguments of ``client.start``; every timing is in seconds.

    *poll_interval*: how often an idle queue is polled when no NOTIFY arrives.
    *idle_poll_interval*: while the LISTEN connection delivers notifications, how
    far an idle queue's poll, promotion, the cron pass and the outbox sweeper back
    off (each doubles its interval after every pass that found nothing, up to this;
    a notification wakes it at once, see :mod:`wai._pace`).
    *heartbeat_interval*: how often running attempts refresh their heartbeat.
    *heartbeat_staleness*: how old a heartbeat must be before rescue (>= 3 x
    heartbeat_interval). *rescue_interval*, *promote_interval*,
    *election_interval*: maintenance cadence (rescue, priority aging and depth
    samples wait longer while a pass is slow, taking at most 2 % of their time:
    ``docs/runtime.md#claims-and-old-snapshots``). *maintenance*: run the
    leader-elected maintenance in this process. *burst*: stop once the served
    queues are empty. *completion_batch_size* and *completion_flush_interval*
    bound how outcomes are grouped into one transaction; *completion_writers* is
    how many such batches are written at once. *record_interval*: how
    often the process refreshes its row in ``runtime_instances``.
    *cleanup_interval*: the longest the leader waits between two passes that delete
    terminal jobs older than *completed_retention*, *failed_retention* or
    *cancelled_retention* (by ``finalized_at``; per-queue overrides live in the
    ``queues`` table); while many jobs expire, passes come sooner, about a batch
    of 1,000 each, at least 1 s apart (``docs/runtime.md#retention-cleanup``).
    *aging_interval*: how often the leader applies priority aging to the queues
    that have it configured. *outbox_interval*: how often a process holding
    follow-up specs dispatches outbox rows (rescue follow-ups) while it has some;
    idle, it backs off like promotion (see *idle_poll_interval*).
    *outbox_max_attempts*: how many failed dispatches an outbox row gets before
    it is marked failed and left for an operator (``wai outbox retry|discard``).
    *outbox_retention*: how old an orphaned outbox row (no process ever registered
    a spec for its kind and outcome, never tried) gets before the leader's cleanup
    deletes it (by ``created_at``); rows that hold follow-ups to dispatch,
    pending or failed, are never deleted by retention. *dlq*: the dead-letter
    policy of every served queue whose :class:`wai.QueueConfig` leaves it None
    (None here too: keep what the ``queues`` table says). *dlq_retention*: how
    long dead-letter entries are kept (by the time they entered), unless their
    queue sets its own. *cron_interval*: how often the leader fires due periodic
    schedules. *analyze_interval*: how often the leader checks whether the jobs
    table changed enough since its last ANALYZE to need another (see
    :class:`wai.maintenance.Analyzer`). *reindex_interval*: how often the leader
    looks for an index of the jobs table that a long-held snapshot left far larger than
    its entries, and rebuilds it (see :class:`wai.maintenance.Reindexer`).
    *depth_interval*: how often the leader samples every queue's depth and lag for
    the dashboard's charts (see :class:`wai.maintenance.DepthSampler`).
    *throughput_interval*: how often the process adds its per-minute outcome counts
    to the ``throughput`` table.
    *metrics_interval*: how often the process reads the database's figures for its
    gauges (queue depth and lag, outbox, dead letters), while an exporter reads wai's
    metrics (see docs/observability.md).
    """

    poll_interval: float = 1.0
    idle_poll_interval: float = 30.0
    heartbeat_interval: float = 10.0
    heartbeat_staleness: float = 60.0
    rescue_interval: float = 10.0
    promote_interval: float = 0.5
    election_interval: float = 5.0
    maintenance: bool = True
    burst: bool = False
    completion_batch_size: int = 512
    completion_flush_interval: float = 0.001
    # Two: one batch's statements and commit overlap the next's (one writer was the drain's
    # bottleneck).
    completion_writers: int = 2
    promote_batch_size: int = 4096
    record_interval: float = 5.0
    cleanup_interval: float = 60.0
    completed_retention: float = 24 * 3600.0
    failed_retention: float = 7 * 24 * 3600.0
    cancelled_retention: float = 7 * 24 * 3600.0
    aging_interval: float = 10.0
    outbox_interval: float = 1.0
    outbox_retention: float = 7 * 24 * 3600.0
    outbox_max_attempts: int = 10
    dlq: bool | None = None
    dlq_retention: float = 30 * 24 * 3600.0
    cron_interval: float = 1.0
    analyze_interval: float = 30.0
    reindex_interval: float = 60.0
    depth_interval: float = 15.0
    throughput_interval: float = 5.0
    metrics_interval: float = 15.0

    def __post_init__(self) -> None:
        for name in (
            "poll_interval",
            "idle_poll_interval",
            "heartbeat_interval",
            "heartbeat_staleness",
            "rescue_interval",
            "promote_interval",
            "election_interval",
            "record_interval",
            "cleanup_interval",
            "completed_retention",
            "failed_retention",
            "cancelled_retention",
            "aging_interval",
            "outbox_interval",
            "outbox_retention",
            "dlq_retention",
            "cron_interval",
            "analyze_interval",
            "reindex_interval",
            "depth_interval",
            "throughput_interval",
            "metrics_interval",
        ):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValidationError(
                    f"{name} must be a finite number of seconds > 0, got {value!r}"
                )
        for name in (
            "completed_retention",
            "failed_retention",
            "cancelled_retention",
            "outbox_retention",
            "dlq_retention",
        ):
            if not getattr(self, name) <= MAX_SECONDS:  # NaN and inf too
                raise ValidationError(f"{name} must be at most {MAX_SECONDS:.0f} seconds")
        # with a tolerance: 3 * 0.2 == 0.6000000000000001, and 0.6 is exactly 3 x 0.2
        if self.heartbeat_staleness < 3 * self.heartbeat_interval * (1 - 1e-9):
            raise ValidationError(
                f"heartbeat_staleness ({self.heartbeat_staleness}s) must be at least "
                f"3 x heartbeat_interval ({self.heartbeat_interval}s), or live jobs get rescued"
            )
        if self.dlq is not None and not isinstance(self.dlq, bool):
            raise ValidationError(f"dlq must be True, False or None, got {self.dlq!r}")
        if not 1 <= self.completion_batch_size <= 10_000:
            raise ValidationError("completion_batch_size must be 1..10000")
        if (
            isinstance(self.completion_writers, bool)
            or not isinstance(self.completion_writers, int)
            or not 1 <= self.completion_writers <= 16
        ):
            raise ValidationError(
                f"completion_writers must be 1..16, got {self.completion_writers!r}"
            )
        if (
            isinstance(self.outbox_max_attempts, bool)
            or not isinstance(self.outbox_max_attempts, int)
            or not 1 <= self.outbox_max_attempts <= 1000
        ):
            raise ValidationError(
                f"outbox_max_attempts must be 1..1000, got {self.outbox_max_attempts!r}"
            )
        if not 0 <= self.completion_flush_interval <= 1:
            raise ValidationError("completion_flush_interval must be 0..1 seconds")
