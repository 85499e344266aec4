"""Operator actions without I/O: the queue statistics model and argument checks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wai._job import JobState
from wai.errors import InvalidStateError, JobNotFound, ValidationError

__all__ = [
    "CANCELLABLE_STATES",
    "DRAINED_STATES",
    "RETRYABLE_STATES",
    "QueueStats",
    "check_job_id",
    "rejected",
]

#: States :meth:`cancel` applies to: every non-terminal state.
CANCELLABLE_STATES = frozenset(s for s in JobState if not s.is_terminal)

#: States :meth:`retry` applies to.
RETRYABLE_STATES = frozenset({JobState.FAILED, JobState.CANCELLED, JobState.WAITING_EXTERNAL})

#: States :meth:`drain_queue` cancels: jobs waiting to run, not running ones.
DRAINED_STATES = frozenset(
    {JobState.AVAILABLE, JobState.SCHEDULED, JobState.RETRYABLE, JobState.WAITING_EXTERNAL}
)

_MAX_ID = 2**63 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueStats:
    """A snapshot of one queue for operators.

    ``counts`` maps every :class:`wai.JobState` value to its number of jobs (0 when
    none). ``oldest_available_lag`` is how many seconds the oldest ``available``
    job has been due (``now - run_at``), 0.0 when no job is available: a growing
    lag means the queue's workers do not keep up (or the queue is paused).
    """

    name: str
    paused: bool
    paused_at: datetime | None
    counts: dict[str, int]
    oldest_available_lag: float

    @property
    def total(self) -> int:
        """Jobs of the queue in any state."""
        return sum(self.counts.values())

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> QueueStats:
        """Build the stats from a ``queue_stats`` record; missing states count 0."""
        found: dict[str, Any] = rec["counts"] or {}
        return cls(
            name=rec["name"],
            paused=bool(rec["paused"]),
            paused_at=rec["paused_at"],
            counts={s.value: int(found.get(s.value, 0)) for s in JobState},
            oldest_available_lag=float(rec["oldest_available_lag"] or 0.0),
        )


def check_job_id(job_id: object) -> int:
    """Return ``job_id`` if it is an int; raise JobNotFound when no job can have it.

    Ids are positive 64-bit integers, so ``0``, ``-1`` or ``2**70`` name no job;
    a non-integer (``"1"``, ``1.5``, ``True``) is a :class:`wai.ValidationError`.
    """
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise ValidationError(f"a job id is an integer, got {job_id!r}")
    if not 1 <= job_id <= _MAX_ID:
        raise JobNotFound(f"no job with id {job_id}")
    return job_id


def check_filter_id(value: object, name: str) -> int | None:
    """``None``, or an id filter PostgreSQL can compare (a 64-bit integer).

    Anything else raises :class:`wai.ValidationError` naming the filter, before the
    query runs (``before_id=2**70`` is a mistake to report, not a page to fetch).
    """
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not -_MAX_ID - 1 <= value <= _MAX_ID
    ):
        raise ValidationError(f"{name} must be a 64-bit integer job id or None, got {value!r}")
    return value


def rejected(
    action: str, job_id: int, state: str, allowed: frozenset[JobState]
) -> InvalidStateError:
    """The :class:`wai.InvalidStateError` for ``action`` on a job found in ``state``."""
    order = [s.value for s in JobState if s in allowed]
    which = f"{', '.join(order[:-1])} or {order[-1]}" if len(order) > 1 else order[0]
    return InvalidStateError(
        f"cannot {action} job {job_id}: it is {state}; {action} applies to {which} jobs",
        state=state,
    )
