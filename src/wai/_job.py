"""The job model: states, the committed row snapshot and its lineage."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from wai._json import loads
from wai._slots import positional_constructor

__all__ = [
    "INSERT_COLUMNS",
    "ROW_COLUMNS",
    "TERMINAL_STATES",
    "JobRow",
    "JobState",
    "Trigger",
    "job_rows",
]


class JobState(enum.StrEnum):
    """The eight states of a job. Terminal: completed, failed, cancelled."""

    SCHEDULED = "scheduled"
    AVAILABLE = "available"
    RUNNING = "running"
    RETRYABLE = "retryable"
    WAITING_EXTERNAL = "waiting_external"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """Whether no worker will touch a job in this state again."""
        return self in TERMINAL_STATES


TERMINAL_STATES = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED})

_STATES: dict[str, JobState] = {s.value: s for s in JobState}


_TIMESTAMPS = (
    "run_at",
    "attempted_at",
    "heartbeat_at",
    "deadline_at",
    "finalized_at",
    "created_at",
    "callback_timeout_at",
)

#: The select list that :meth:`JobRow.from_row` reads, in its order (the ``RETURNING``
#: list of the insert queries). The jsonb columns come as text and are decoded here:
#: psycopg's jsonb loader costs a Python call per value, and most of these values are
#: ``{}``, ``[]`` or NULL.
ROW_COLUMNS = (
    "id",
    "kind",
    "queue",
    "args::text",
    "state",
    "priority",
    "attempt",
    "max_attempts",
    "run_at",
    "attempted_at",
    "heartbeat_at",
    "deadline_at",
    "finalized_at",
    "created_at",
    "errors::text",
    "metadata::text",
    "tags",
    "unique_key",
    "ordering_key",
    "callback_id",
    "callback_timeout_at",
    "run_lease",
    "progress::text",
    "trigger_job_id",
    "trigger_run_lease",
    "trigger_outcome",
    "trigger_spec",
    "callback_result::text",
)


#: What an insert statement returns of each new row, in this order: the values the server
#: chose. The client builds the rest of the row from what it sent (``wai._inserts``).
INSERT_COLUMNS = ("id", "run_at", "created_at", "unique_key")


def _json(text: str | None) -> Any:
    """Decode a jsonb column read as text, as wai's connections decode jsonb."""
    if text is None:
        return None
    if text == "{}":
        return {}
    if text == "[]":
        return []
    return loads(text)


@dataclass(frozen=True, slots=True, kw_only=True)
class Trigger:
    """Where a follow-up job came from: the attempt and outcome that enqueued it."""

    job_id: int
    run_lease: int
    outcome: str
    spec: str


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRow:
    """A frozen snapshot of one committed job row.

    ``callback_result`` is the payload an external callback resolution left: the
    one ``complete_external`` (or ``resolve_callback``) completed the job with,
    or a ``resume_external`` payload not yet taken by the waiting handler.
    """

    id: int
    kind: str
    queue: str
    args: dict[str, Any]
    state: JobState
    priority: int
    attempt: int
    max_attempts: int
    run_at: datetime
    attempted_at: datetime | None
    heartbeat_at: datetime | None
    deadline_at: datetime | None
    finalized_at: datetime | None
    created_at: datetime
    errors: tuple[dict[str, Any], ...]
    metadata: dict[str, Any]
    tags: tuple[str, ...]
    unique_key: bytes | None
    ordering_key: str | None
    callback_id: UUID | None
    callback_timeout_at: datetime | None
    run_lease: int
    progress: dict[str, Any] | None
    trigger: Trigger | None
    callback_result: Any = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobRow:
        """Build a row from ``to_jsonb(job)`` (as stored in the outbox)."""
        rec = dict(data)
        for name in _TIMESTAMPS:
            value = rec.get(name)
            if isinstance(value, str):
                rec[name] = datetime.fromisoformat(value)
        key = rec.get("unique_key")
        if isinstance(key, str):
            rec["unique_key"] = bytes.fromhex(key.removeprefix("\\x"))
        cb = rec.get("callback_id")
        if isinstance(cb, str):
            rec["callback_id"] = UUID(cb)
        return cls.from_record(rec)

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> JobRow:
        """Build a row from a ``dict_row`` record of the jobs table."""
        trigger = _trigger(
            rec.get("trigger_job_id"),
            rec.get("trigger_run_lease"),
            rec.get("trigger_outcome"),
            rec.get("trigger_spec"),
        )
        key = rec.get("unique_key")
        return cls(
            id=rec["id"],
            kind=rec["kind"],
            queue=rec["queue"],
            args=rec["args"],
            state=JobState(rec["state"]),
            priority=rec["priority"],
            attempt=rec["attempt"],
            max_attempts=rec["max_attempts"],
            run_at=rec["run_at"],
            attempted_at=rec["attempted_at"],
            heartbeat_at=rec["heartbeat_at"],
            deadline_at=rec["deadline_at"],
            finalized_at=rec["finalized_at"],
            created_at=rec["created_at"],
            errors=tuple(rec["errors"] or ()),
            metadata=rec["metadata"] or {},
            tags=tuple(rec["tags"] or ()),
            unique_key=bytes(key) if key is not None else None,
            ordering_key=rec.get("ordering_key"),
            callback_id=rec.get("callback_id"),
            callback_timeout_at=rec.get("callback_timeout_at"),
            run_lease=rec["run_lease"],
            progress=rec.get("progress"),
            trigger=trigger,
            callback_result=rec.get("callback_result"),
        )

    @staticmethod
    def from_row(row: Sequence[Any]) -> JobRow:
        """Build a row from a tuple that starts with :data:`ROW_COLUMNS` (more is ignored).

        The same values as :meth:`from_record`, at about half its cost: a batch insert
        decodes one row per job.
        """
        (
            id_,
            kind,
            queue,
            args,
            state,
            priority,
            attempt,
            max_attempts,
            run_at,
            attempted_at,
            heartbeat_at,
            deadline_at,
            finalized_at,
            created_at,
            errors,
            metadata,
            tags,
            key,
            ordering_key,
            callback_id,
            callback_timeout_at,
            run_lease,
            progress,
            trigger_id,
            trigger_run_lease,
            trigger_outcome,
            trigger_spec,
            callback_result,
            *_,
        ) = row
        trigger = _trigger(trigger_id, trigger_run_lease, trigger_outcome, trigger_spec)
        return _new_row(  # the fields in order
            id_,
            kind,
            queue,
            _json(args),
            _STATES[state],
            priority,
            attempt,
            max_attempts,
            run_at,
            attempted_at,
            heartbeat_at,
            deadline_at,
            finalized_at,
            created_at,
            tuple(_json(errors) or ()),
            _json(metadata) or {},
            tuple(tags or ()),
            bytes(key) if key is not None else None,
            ordering_key,
            callback_id,
            callback_timeout_at,
            run_lease,
            _json(progress),
            trigger,
            _json(callback_result),
        )


_new_row = positional_constructor(JobRow)


def _trigger(job_id: Any, run_lease: Any, outcome: Any, spec: Any) -> Trigger | None:
    """The lineage of a follow-up row, None for a job no outcome enqueued."""
    if job_id is None:
        return None
    return Trigger(job_id=job_id, run_lease=run_lease, outcome=outcome, spec=spec)


def job_rows(_cursor: object) -> Callable[[Sequence[Any]], JobRow]:
    """psycopg row factory: each row of a statement whose RETURNING starts with
    :data:`ROW_COLUMNS` (a claim, a finalize, a rescue) as a :class:`JobRow`."""
    return JobRow.from_row
