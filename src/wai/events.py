"""Lifecycle events delivered to ``on_event`` hooks: observation only, best-effort.

Every event carries the committed post-transition row as ``job`` and the decoded
args as ``args``. Hooks run after the transition commits, in the process that made
it; they may be lost on a crash or shutdown. Use them for metrics and logs, never
for side effects that must happen: those are follow-up jobs (``on_*_enqueue``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wai._job import JobRow

__all__ = [
    "Cancelled",
    "Completed",
    "Exhausted",
    "JobEvent",
    "Rescued",
    "Retried",
    "Started",
    "WaitingForCallback",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class JobEvent:
    """Base of every lifecycle event."""

    job: JobRow
    args: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Started(JobEvent):
    """An attempt was claimed and its handler is about to run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Completed(JobEvent):
    """The handler returned normally; ``duration`` is the attempt's run time in seconds."""

    duration: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Retried(JobEvent):
    """The attempt failed with attempts left; the job runs again at ``next_run_at``."""

    error: str
    attempt: int
    next_run_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Exhausted(JobEvent):
    """The job failed for good: terminal error or no attempts left."""

    error: str
    attempt: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancelled(JobEvent):
    """The handler returned ``wai.Cancel(reason)``."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitingForCallback(JobEvent):
    """The job parked in ``waiting_external`` until its callback is resolved."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Rescued(JobEvent):
    """Maintenance closed an abandoned attempt (``reason`` is a :class:`wai.RescueReason`)."""

    reason: str
