"""External callbacks' queries (``sql/queries/callbacks.sql``): typed values in, models out."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from wai._db_async import channel
from wai._job import JobRow
from wai._sql import query, validate_schema
from wai.callbacks._models import CallbackExpressions
from wai.callbacks._waiting import CallbackTimeout, WaitingCursor, WaitingJob

__all__ = [
    "callback_channel",
    "callback_request_remember",
    "job_callback_complete",
    "job_callback_fail",
    "job_callback_heartbeat",
    "job_callback_lock",
    "job_callback_park_in_place",
    "job_callback_parked",
    "job_callback_register",
    "job_callback_resume",
    "job_callback_retry",
    "job_callback_take",
    "job_callback_timeouts",
    "job_callback_unpark",
    "job_callback_wait_specs",
    "job_waiting_list",
]


async def _rows(
    conn: AsyncConnection[Any], name: str, schema: str, params: dict[str, Any]
) -> list[JobRow]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query(name, schema), params)
        return [JobRow.from_record(r) for r in await cur.fetchall()]


def callback_channel(schema: str) -> str:
    """The NOTIFY channel that wakes a handler waiting in place for its callback.

    The payload is ``{"job_id": ..., "run_lease": ...}`` of the resolved job.
    """
    return f"{validate_schema(schema)}.callback"


async def job_callback_register(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    job_id: int,
    run_lease: int,
    callback_id: UUID,
    timeout: float,
    expressions: CallbackExpressions,
) -> datetime | None:
    """Give a running attempt a callback; its timeout, or None when the attempt is stale."""
    cur = await conn.execute(
        query("job_callback_register", schema),
        {
            "id": job_id,
            "run_lease": run_lease,
            "callback_id": callback_id,
            "timeout": timeout,
            "filter": expressions.filter,
            "on_complete": expressions.on_complete,
            "on_fail": expressions.on_fail,
            "transform": expressions.transform,
        },
    )
    row = await cur.fetchone()
    return row[0] if row else None


async def job_callback_park_in_place(
    conn: AsyncConnection[Any], schema: str, *, job_id: int, run_lease: int, callback_id: UUID
) -> JobRow | None:
    """Mark a handler waiting for ``callback_id`` as waiting_external; its row, or None."""
    rows = await _rows(
        conn,
        "job_callback_park_in_place",
        schema,
        {"id": job_id, "run_lease": run_lease, "callback_id": callback_id},
    )
    return rows[0] if rows else None


async def job_callback_wait_specs(
    conn: AsyncConnection[Any], schema: str, *, job_id: int, run_lease: int
) -> set[str]:
    """Lineage spec names of the follow-ups of one attempt's waits in place."""
    cur = await conn.execute(
        query("job_callback_wait_specs", schema), {"id": job_id, "run_lease": run_lease}
    )
    return {r[0] for r in await cur.fetchall()}


async def job_callback_parked(
    conn: AsyncConnection[Any], schema: str, callback_id: UUID
) -> int | None:
    """The id of the job parked by ``WaitForCallback`` on ``callback_id``, if any."""
    cur = await conn.execute(query("job_callback_parked", schema), {"callback_id": callback_id})
    rec = await cur.fetchone()
    return None if rec is None else int(rec[0])


async def job_callback_unpark(
    conn: AsyncConnection[Any], schema: str, *, job_id: int, run_lease: int
) -> None:
    """Put a handler that stopped waiting back to running."""
    await conn.execute(query("job_callback_unpark", schema), {"id": job_id, "run_lease": run_lease})


async def job_callback_take(
    conn: AsyncConnection[Any], schema: str, *, job_id: int, run_lease: int
) -> dict[str, Any] | None:
    """The state, run_lease and callback_id of a job, and its resume payload if ``taken``."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            query("job_callback_take", schema), {"id": job_id, "run_lease": run_lease}
        )
        return await cur.fetchone()


async def callback_request_remember(
    conn: AsyncConnection[Any], schema: str, *, digest: bytes, ttl: float
) -> bool:
    """Remember a signed callback request for ``ttl`` seconds; False if it was seen (replay)."""
    cur = await conn.execute(
        query("callback_request_remember", schema), {"digest": digest, "ttl": ttl}
    )
    rec = await cur.fetchone()
    return bool(rec is not None and rec[0])


async def job_callback_lock(
    conn: AsyncConnection[Any], schema: str, callback_id: UUID
) -> tuple[JobRow, CallbackExpressions] | None:
    """Lock the job of an unresolved callback; its row and CEL expressions."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("job_callback_lock", schema), {"callback_id": callback_id})
        rec = await cur.fetchone()
    if rec is None:
        return None
    return JobRow.from_record(rec), CallbackExpressions.from_record(rec)


async def _resolved(
    conn: AsyncConnection[Any], name: str, schema: str, params: dict[str, Any]
) -> JobRow | None:
    params["callback_channel"] = callback_channel(schema)
    rows = await _rows(conn, name, schema, params)
    return rows[0] if rows else None


async def job_callback_complete(
    conn: AsyncConnection[Any], schema: str, *, callback_id: UUID, payload: str | None
) -> JobRow | None:
    """Complete the job of ``callback_id`` storing ``payload`` (JSON); None if not found."""
    return await _resolved(
        conn, "job_callback_complete", schema, {"callback_id": callback_id, "payload": payload}
    )


async def job_callback_fail(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    callback_id: UUID,
    error: str,
    expression: str | None,
) -> JobRow | None:
    """Fail the job of ``callback_id`` for good; None if not found."""
    return await _resolved(
        conn,
        "job_callback_fail",
        schema,
        {"callback_id": callback_id, "error": error, "expression": expression},
    )


async def job_callback_retry(
    conn: AsyncConnection[Any], schema: str, *, callback_id: UUID, error: str
) -> JobRow | None:
    """Make the parked job of ``callback_id`` available now; None if not found."""
    return await _resolved(
        conn,
        "job_callback_retry",
        schema,
        {"callback_id": callback_id, "error": error, "channel": channel(schema)},
    )


async def job_callback_resume(
    conn: AsyncConnection[Any], schema: str, *, callback_id: UUID, payload: str
) -> JobRow | None:
    """Hand ``payload`` (JSON) to the handler waiting on ``callback_id``; None if not found."""
    return await _resolved(
        conn, "job_callback_resume", schema, {"callback_id": callback_id, "payload": payload}
    )


async def job_callback_heartbeat(
    conn: AsyncConnection[Any], schema: str, *, callback_id: UUID, timeout: float
) -> JobRow | None:
    """Extend the timeout of ``callback_id`` to now + ``timeout``; None if not found."""
    rows = await _rows(
        conn, "job_callback_heartbeat", schema, {"callback_id": callback_id, "timeout": timeout}
    )
    return rows[0] if rows else None


async def job_waiting_list(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    queue: str | None,
    kind: str | None,
    after: WaitingCursor | None,
    limit: int,
) -> list[WaitingJob]:
    """Parked jobs, soonest timeout first, after the cursor."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            query("job_waiting_list", schema),
            {
                "queue": queue,
                "kind": kind,
                "after_at": after.timeout_at if after is not None else None,
                "after_id": after.job_id if after is not None else None,
                "limit": limit,
            },
            # planned for the cursor given: a generic plan could not bound the index walk
            prepare=False,
        )
        return [WaitingJob.from_record(r) for r in await cur.fetchall()]


async def job_callback_timeouts(
    conn: AsyncConnection[Any], schema: str, *, queue: str | None, kind: str | None, scan: int
) -> list[CallbackTimeout]:
    """Jobs whose last attempt timed out on its callback, among the ``scan`` newest of each
    source (unordered)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            query("job_callback_timeouts", schema), {"queue": queue, "kind": kind, "scan": scan}
        )
        return [CallbackTimeout.from_record(r) for r in await cur.fetchall()]
