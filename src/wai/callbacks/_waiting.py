"""Parked jobs and callback timeouts as operators see them: the models and paging cursors.

No I/O: the queries are ``job_waiting_list`` and ``job_callback_timeouts`` of
``sql/queries/callbacks.sql``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from uuid import UUID

from wai._job import JobRow
from wai.errors import ValidationError

__all__ = [
    "TIMEOUT_SCAN",
    "CallbackTimeout",
    "WaitingCursor",
    "WaitingJob",
    "decode_waiting_cursor",
    "encode_waiting_cursor",
    "timed_out_at",
]

#: How many of the newest retryable jobs, failed jobs and dead-letter entries
#: :meth:`list_callback_timeouts` looks through, each: no index finds a callback timeout.
TIMEOUT_SCAN: Final = 1000


@dataclass(frozen=True, slots=True)
class WaitingCursor:
    """Where a listing of waiting jobs continues: after ``(timeout_at, job_id)``."""

    timeout_at: datetime
    job_id: int


def encode_waiting_cursor(timeout_at: datetime, job_id: int) -> str:
    """``"<timeout ISO 8601>/<job id>"``: opaque to callers, readable in a URL."""
    return f"{timeout_at.isoformat()}/{job_id}"


def decode_waiting_cursor(cursor: object) -> WaitingCursor:
    """Split a cursor made by :func:`encode_waiting_cursor`; anything else is a ValidationError."""
    invalid = ValidationError(
        f"invalid waiting-job cursor {cursor!r:.80}: pass a WaitingJob's .cursor"
    )
    if not isinstance(cursor, str) or len(cursor) > 100:
        raise invalid
    at, _, ident = cursor.rpartition("/")
    if not ident.isascii() or not ident.isdigit() or len(ident) > 19:
        raise invalid
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        raise invalid from None
    if when.tzinfo is None:
        raise invalid
    return WaitingCursor(when, int(ident))


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitingJob:
    """A job parked in ``waiting_external`` until an outside system answers its callback.

    ``job`` is its row; ``overdue`` says that its callback timed out (on the
    server's clock): the next rescue pass of maintenance closes the attempt
    (retryable, or failed when no attempt is left). wai records no time of the
    park itself: it happened during the attempt that began at
    ``job.attempted_at``. ``cursor`` is what :meth:`list_waiting` takes as
    ``after`` to continue after this job.
    """

    job: JobRow
    overdue: bool

    @property
    def callback_id(self) -> UUID | None:
        """The id an outside system resolves the callback with."""
        return self.job.callback_id

    @property
    def timeout_at(self) -> datetime:
        """When the callback times out (``heartbeat_callback`` pushes it out)."""
        at = self.job.callback_timeout_at
        assert at is not None, "job_waiting_list lists jobs with a callback timeout"
        return at

    @property
    def in_place(self) -> bool:
        """Whether a handler waits in place (``job.wait_for_callback``), heartbeating,
        rather than the attempt having returned ``WaitForCallback``."""
        return self.job.heartbeat_at is not None

    @property
    def cursor(self) -> str:
        """The paging cursor just past this job."""
        return encode_waiting_cursor(self.timeout_at, self.job.id)

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> WaitingJob:
        """Build it from a ``job_waiting_list`` record."""
        return cls(job=JobRow.from_record(rec), overdue=bool(rec["overdue"]))


@dataclass(frozen=True, slots=True, kw_only=True)
class CallbackTimeout:
    """A job whose last attempt ended because its callback timed out.

    Maintenance closed the attempt: ``job`` is the job now, ``retryable`` (its
    next attempt is due at ``job.run_at``) or ``failed``; when ``dead_lettered``,
    it is the row as it entered the dead-letter queue (see
    :meth:`get_dlq_entry`). ``timed_out_at`` is when maintenance closed the
    attempt (None when its error entry holds no readable time).
    """

    job: JobRow
    timed_out_at: datetime | None
    dead_lettered: bool

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> CallbackTimeout:
        """Build it from a ``job_callback_timeouts`` record."""
        dlq_at: datetime | None = rec["dlq_at"]
        return cls(
            job=JobRow.from_record(rec),
            timed_out_at=dlq_at if dlq_at is not None else timed_out_at(rec["timed_out_at"]),
            dead_lettered=dlq_at is not None,
        )


def timed_out_at(text: object) -> datetime | None:
    """The time of a rescue's error entry (``"at"``), or None when it is not one."""
    if not isinstance(text, str) or len(text) > 64:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None
