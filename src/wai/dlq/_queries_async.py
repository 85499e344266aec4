"""The dead-letter queue's queries (``sql/queries/dlq.sql``): typed values in, models out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from wai._db_async import channel
from wai._job import JobRow, JobState
from wai._sql import query
from wai.dlq._models import DlqEntry, DlqFilter

__all__ = [
    "RetryBatch",
    "db_now",
    "dlq_count",
    "dlq_delete_expired",
    "dlq_depth",
    "dlq_get",
    "dlq_list",
    "dlq_move_failed",
    "dlq_move_one",
    "dlq_purge",
    "dlq_retry",
    "dlq_route",
]

_NO_FILTER = DlqFilter()


@dataclass(slots=True)
class RetryBatch:
    """What one ``dlq_retry`` statement did.

    ``restored`` are the jobs back in the jobs table; ``held`` the ids whose
    unique key a live job holds (they stay dead-lettered); ``last`` the
    ``(dlq_at, job_id)`` of the last entry looked at, where the next batch starts.
    """

    restored: list[JobRow] = field(default_factory=list[JobRow])
    held: list[int] = field(default_factory=list[int])
    last: tuple[datetime, int] | None = None

    @property
    def looked_at(self) -> int:
        """Entries the statement locked and tried."""
        return len(self.restored) + len(self.held)


async def _scalar(
    conn: AsyncConnection[Any], name: str, schema: str, params: dict[str, Any]
) -> int:
    cur = await conn.execute(query(name, schema), params)
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def db_now(conn: AsyncConnection[Any], schema: str) -> datetime:
    """The database clock (``now()``)."""
    cur = await conn.execute(query("dlq_now", schema))
    row = await cur.fetchone()
    assert row is not None
    return row[0]


async def dlq_route(
    conn: AsyncConnection[Any], schema: str, failed: Sequence[tuple[int, str]]
) -> dict[int, str]:
    """Move the just-failed jobs of DLQ queues to the dead-letter queue, in this transaction.

    ``failed`` pairs a job id with its reason. Jobs of queues without the
    dead-letter queue stay where they are. Returns the moved ids with their reason.
    """
    if not failed:
        return {}
    cur = await conn.execute(
        query("dlq_route", schema),
        {"id": [i for i, _ in failed], "reason": [r for _, r in failed]},
    )
    return {r[0]: r[1] for r in await cur.fetchall()}


async def dlq_move_one(
    conn: AsyncConnection[Any], schema: str, job_id: int, reason: str
) -> tuple[JobState, bool] | None:
    """Move one failed job; None when no job has ``job_id``, else (its state, moved)."""
    cur = await conn.execute(query("dlq_move_one", schema), {"id": job_id, "reason": reason})
    row = await cur.fetchone()
    if row is None:
        return None
    return JobState(row[0]), row[1] is not None


async def dlq_move_failed(
    conn: AsyncConnection[Any], schema: str, flt: DlqFilter, *, reason: str, limit: int
) -> int:
    """Move up to ``limit`` failed jobs matching ``flt`` (its reason is ignored)."""
    params: dict[str, Any] = {**flt.params(), "reason": reason, "limit": limit}
    return await _scalar(conn, "dlq_move_failed", schema, params)


async def dlq_list(
    conn: AsyncConnection[Any],
    schema: str,
    flt: DlqFilter,
    *,
    before: tuple[datetime, int] | None,
    limit: int,
) -> list[DlqEntry]:
    """Entries newest first, after the ``before`` cursor."""
    params: dict[str, Any] = {
        **flt.params(),
        "before_at": before[0] if before else None,
        "before_id": before[1] if before else None,
        "limit": limit,
    }
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("dlq_list", schema), params)
        return [DlqEntry.from_record(r) for r in await cur.fetchall()]


async def dlq_get(conn: AsyncConnection[Any], schema: str, job_id: int) -> DlqEntry | None:
    """The entry of job ``job_id``, if it is dead-lettered."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("dlq_get", schema), {"id": job_id})
        rec = await cur.fetchone()
    return DlqEntry.from_record(rec) if rec is not None else None


async def dlq_depth(conn: AsyncConnection[Any], schema: str) -> dict[str, int]:
    """Entries per queue."""
    cur = await conn.execute(query("dlq_depth", schema))
    return {r[0]: int(r[1]) for r in await cur.fetchall()}


async def dlq_count(conn: AsyncConnection[Any], schema: str, flt: DlqFilter) -> int:
    """Entries matching ``flt``."""
    return await _scalar(conn, "dlq_count", schema, dict(flt.params()))


async def dlq_retry(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    ids: Sequence[int] | None = None,
    flt: DlqFilter = _NO_FILTER,
    after: tuple[datetime, int] | None = None,
    until: datetime | None = None,
    limit: int,
    to_queue: str | None = None,
    priority: int | None = None,
    run_at: datetime | None = None,
) -> RetryBatch:
    """Restore up to ``limit`` entries (``ids``, or those matching ``flt``) oldest first,
    after ``after`` and up to ``until`` (``dlq_at``)."""
    params: dict[str, Any] = {
        **flt.params(),
        "ids": list(ids) if ids is not None else None,
        "after_at": after[0] if after else None,
        "after_id": after[1] if after else None,
        "until": until,
        "limit": limit,
        "to_queue": to_queue,
        "priority": priority,
        "run_at": run_at,
        "channel": channel(schema),
    }
    batch = RetryBatch()
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("dlq_retry", schema), params)
        for rec in await cur.fetchall():
            batch.last = (rec["dlq_at"], rec["dlq_job_id"])
            if rec["id"] is None:
                batch.held.append(rec["dlq_job_id"])
            else:
                batch.restored.append(JobRow.from_record(rec))
    return batch


async def dlq_purge(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    ids: Sequence[int] | None = None,
    flt: DlqFilter = _NO_FILTER,
    limit: int,
) -> int:
    """Delete up to ``limit`` entries (``ids``, or those matching ``flt``); returns how many."""
    params: dict[str, Any] = {
        **flt.params(),
        "ids": list(ids) if ids is not None else None,
        "limit": limit,
    }
    return await _scalar(conn, "dlq_purge", schema, params)


async def dlq_delete_expired(
    conn: AsyncConnection[Any], schema: str, *, retention: float, limit: int
) -> int:
    """Retention: delete up to ``limit`` entries past their queue's DLQ retention."""
    return await _scalar(
        conn, "dlq_delete_expired", schema, {"retention": retention, "limit": limit}
    )
