"""Outbox entries, states and counts, for operators: the models, without I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from wai.errors import ValidationError

__all__ = ["OUTBOX_STATES", "OutboxEntry", "OutboxStats", "check_outbox_state"]

#: The states of an outbox row: retried by sweepers, or given up until an operator acts.
OUTBOX_STATES: Final = ("pending", "failed")


def check_outbox_state(state: object) -> str | None:
    """``state`` if it is None or one of :data:`OUTBOX_STATES`, else a ValidationError."""
    if state is None or (isinstance(state, str) and state in OUTBOX_STATES):
        return state
    raise ValidationError(f"outbox state must be None, 'pending' or 'failed', got {state!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxEntry:
    """One outbox row: the follow-ups of one transition, not dispatched yet.

    ``job_id``, ``run_lease`` and ``outcome`` name the trigger (the transition
    whose follow-ups wait); ``kind`` is the trigger's kind and ``detail`` the
    outcome's detail (a rescue reason, a cancel reason). ``attempts`` counts the
    failed dispatches, ``last_error`` is the last one's ``"Type: message"``,
    ``next_attempt_at`` when a sweeper tries again. ``failed_at`` is set once
    the row gave up (``state == "failed"``).
    """

    id: int
    job_id: int
    run_lease: int
    kind: str
    outcome: str
    detail: dict[str, Any]
    attempts: int
    last_error: str | None
    next_attempt_at: datetime
    failed_at: datetime | None
    created_at: datetime

    @property
    def state(self) -> str:
        """``"failed"`` once sweepers gave up on the row, else ``"pending"``."""
        return "failed" if self.failed_at is not None else "pending"

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> OutboxEntry:
        """Build an entry from an ``outbox_list``/``outbox_retry`` record."""
        return cls(
            id=rec["id"],
            job_id=rec["job_id"],
            run_lease=rec["run_lease"],
            kind=rec["kind"],
            outcome=rec["outcome"],
            detail=dict(rec["detail"] or {}),
            attempts=rec["attempts"],
            last_error=rec["last_error"],
            next_attempt_at=rec["next_attempt_at"],
            failed_at=rec["failed_at"],
            created_at=rec["created_at"],
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxStats:
    """How many outbox rows wait (``pending``) and how many gave up (``failed``).

    ``oldest_pending_at`` is when the oldest pending row was created (None when
    none is): a pending row that grows old means no live process holds specs
    for it, or its dispatch keeps failing.
    """

    pending: int
    failed: int
    oldest_pending_at: datetime | None

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> OutboxStats:
        """Build the counts from an ``outbox_stats`` record."""
        return cls(
            pending=int(rec["pending"] or 0),
            failed=int(rec["failed"] or 0),
            oldest_pending_at=rec["oldest_pending_at"],
        )
