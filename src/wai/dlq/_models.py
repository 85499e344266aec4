"""Dead-letter entries, reasons, filters and paging cursors: the models, without I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from wai._inserts import validate_queue
from wai._job import JobRow
from wai._storable import check_text
from wai.errors import ValidationError

__all__ = [
    "DLQ_REASONS",
    "DlqEntry",
    "DlqFilter",
    "check_reason",
    "decode_cursor",
    "encode_cursor",
    "failure_reason",
]

#: Why a job is in the dead-letter queue. Operators may give any other reason to
#: :meth:`move_to_dlq`; these are the ones wai writes.
DLQ_REASONS: Final = ("terminal_error", "max_attempts_exhausted", "callback_timeout", "manual")


@dataclass(frozen=True, slots=True, kw_only=True)
class DlqEntry:
    """One dead-lettered job.

    ``job`` is the job's row as it was when it moved (state ``failed``, its
    errors, metadata, run lease and lineage); ``reason`` says why it moved and
    ``dlq_at`` when. ``cursor`` is what :meth:`list_dlq` takes as ``before`` to
    continue after this entry.
    """

    job: JobRow
    reason: str
    dlq_at: datetime

    @property
    def cursor(self) -> str:
        """The paging cursor just past this entry (newest first)."""
        return encode_cursor(self.dlq_at, self.job.id)

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> DlqEntry:
        """Build an entry from a ``dlq_list``/``dlq_get`` record."""
        return cls(job=JobRow.from_record(rec), reason=rec["dlq_reason"], dlq_at=rec["dlq_at"])


@dataclass(frozen=True, slots=True, kw_only=True)
class DlqFilter:
    """Which entries a listing or a bulk action covers; None matches anything."""

    queue: str | None = None
    kind: str | None = None
    tag: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.queue is not None:
            validate_queue(self.queue)
        for name in ("kind", "tag", "reason"):
            value = getattr(self, name)
            if value is not None:
                if not isinstance(value, str) or not 1 <= len(value) <= 200:
                    raise ValidationError(f"{name} filter must be 1-200 characters, got {value!r}")
                check_text(value, name)

    @property
    def empty(self) -> bool:
        """True when the filter matches every entry."""
        return self.queue is None and self.kind is None and self.tag is None and self.reason is None

    def params(self) -> dict[str, str | None]:
        """The query parameters of the filter."""
        return {"queue": self.queue, "kind": self.kind, "tag": self.tag, "reason": self.reason}

    def require(self, action: str, *, all: bool) -> None:
        """Refuse a bulk ``action`` over every entry unless ``all`` says so."""
        if self.empty and not all:
            raise ValidationError(
                f"{action} without a filter would touch every dead-letter entry: "
                "give queue=, kind=, tag= or reason=, or pass all=True"
            )


def check_reason(reason: object) -> str:
    """Return ``reason`` if it can label an entry (1-200 storable characters)."""
    if not isinstance(reason, str) or not 1 <= len(reason) <= 200:
        raise ValidationError(f"a dead-letter reason is 1-200 characters, got {reason!r}")
    check_text(reason, "reason")
    return reason


def failure_reason(*, terminal: bool, callback_timeout: bool = False) -> str:
    """The reason a job that just failed enters the dead-letter queue with."""
    if callback_timeout:
        return "callback_timeout"
    return "terminal_error" if terminal else "max_attempts_exhausted"


def encode_cursor(dlq_at: datetime, job_id: int) -> str:
    """``"<dlq_at ISO 8601>/<job id>"``: opaque to callers, readable in a URL."""
    return f"{dlq_at.isoformat()}/{job_id}"


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    """Split a cursor made by :func:`encode_cursor`; anything else is a ValidationError."""
    try:
        at, _, job_id = cursor.rpartition("/")
        when = datetime.fromisoformat(at)
        ident = int(job_id)
    except (AttributeError, TypeError, ValueError):
        raise ValidationError(
            f"invalid dead-letter cursor {cursor!r}: pass an entry's .cursor"
        ) from None
    if when.tzinfo is None:
        raise ValidationError(f"invalid dead-letter cursor {cursor!r}: pass an entry's .cursor")
    return when, ident
