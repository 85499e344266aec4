"""Rescue: close attempts whose worker died, that outlived their deadline, or whose
callback timed out, with the outbox rows of their follow-ups and their dead-letter rows.

Async only: only the maintenance leader rescues.
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection

from wai._job import JobRow, JobState
from wai._outcomes import Rescue, decide_rescue
from wai._tracing import otel
from wai.dlq import _queries_async as dlq_db
from wai.dlq import failure_reason
from wai.transitions import _queries as db
from wai.transitions._apply_async import leave_outbox_rows

__all__ = ["rescue"]


async def rescue(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    staleness: float,
    deadline_grace: float,
    limit: int,
) -> list[tuple[JobRow, str]]:
    """Rescue up to ``limit`` abandoned attempts in one transaction; each row with its reason.

    An attempt is abandoned when its heartbeat is older than ``staleness`` seconds (its
    worker is presumed dead), its deadline passed ``deadline_grace`` seconds ago (a live
    worker records its own deadline error first), or its callback timed out. Each becomes
    retryable after the backoff, or failed on its last attempt (:func:`decide_rescue`);
    its Rescued follow-ups are left to the outbox (no user code runs in maintenance), and
    a failed job of a queue with the dead-letter queue on moves there. While tracing, a
    rescue that closes attempts is one ``rescue`` span, whose context the outbox rows keep.
    """
    async with conn.transaction():
        locked = await db.job_rescue_lock(
            conn, schema, staleness=staleness, deadline_grace=deadline_grace, limit=limit
        )
        decisions = [
            decide_rescue(job_id=i, attempt=attempt, max_attempts=most, reason=why)
            for i, attempt, most, why in locked
        ]
        if not decisions:
            return []
        if otel is not None and otel.active():
            # A span only for a rescue that closes attempts: one per transaction.
            with otel.rescuing() as span:
                rescued = await _close(conn, schema, decisions)
                span.rescued(rescued)
            return rescued
        return await _close(conn, schema, decisions)


async def _close(
    conn: AsyncConnection[Any], schema: str, decisions: list[Rescue]
) -> list[tuple[JobRow, str]]:
    """Apply ``decisions`` with their outbox and dead-letter rows (in the caller's transaction)."""
    rescued = await db.job_rescue_apply(conn, schema, decisions)
    await leave_outbox_rows(
        conn, schema, "rescued", [(row.id, {"reason": why}) for row, why in rescued]
    )
    # Last: the move deletes the failed jobs' rows, which the outbox rows above snapshot.
    await dlq_db.dlq_route(
        conn,
        schema,
        [
            (row.id, failure_reason(terminal=False, callback_timeout=why == "callback_timeout"))
            for row, why in rescued
            if row.state is JobState.FAILED
        ],
    )
    return rescued
