"""Rescue: close attempts whose worker died, that outlived their deadline, or whose
callback timed out, with the outbox rows of their follow-ups and their dead-letter rows.

Async only: only the maintenance leader rescues.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from wai._job import JobRow, JobState
from wai._outcomes import Rescue, decide_rescue
from wai._sql import query
from wai.dlq import _queries_async as dlq_db
from wai.dlq import failure_reason
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
    a failed job of a queue with the dead-letter queue on moves there.
    """
    async with conn.transaction():
        cur = await conn.execute(
            query("job_rescue_lock", schema),
            {"staleness": staleness, "deadline_grace": deadline_grace, "limit": limit},
        )
        decisions = [
            decide_rescue(job_id=r[0], attempt=r[1], max_attempts=r[2], reason=r[3])
            for r in await cur.fetchall()
        ]
        if not decisions:
            return []
        rescued = await _apply(conn, schema, decisions)
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


async def _apply(
    conn: AsyncConnection[Any], schema: str, decisions: Sequence[Rescue]
) -> list[tuple[JobRow, str]]:
    cur = await conn.execute(
        query("job_rescue_apply", schema),
        {
            "id": [d.job_id for d in decisions],
            "state": [d.state.value for d in decisions],
            "delay": [d.delay for d in decisions],
            "error": [d.error for d in decisions],
            "reason": [d.reason for d in decisions],
        },
    )
    rows = [(JobRow.from_row(r), str(r[-1])) for r in await cur.fetchall()]
    rows.sort(key=lambda pair: pair[0].id)  # RETURNING has no order of its own
    return rows
