"""The queries only the worker's finalizer and the maintenance rescue run (async only).

The SQL is in ``jobs.sql``, called by name: typed values in, rows out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, LiteralString

from psycopg import AsyncConnection

from wai._db_async import unless_all
from wai._job import JobRow, JobState, job_rows
from wai._outcomes import Outcome, Rescue
from wai._sql import query

__all__ = ["job_finalize_many", "job_finalize_many_ids", "job_rescue_apply", "job_rescue_lock"]


async def _positional(
    conn: AsyncConnection[Any], text: LiteralString, params: dict[str, Any]
) -> list[JobRow]:
    """Run ``text``, whose RETURNING starts with ``ROW_COLUMNS``; its rows as JobRows."""
    async with conn.cursor(row_factory=job_rows) as cur:
        await cur.execute(text, params)
        return await cur.fetchall()


def _finalize_params(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    # A column of defaults only goes as NULL, which unnest pads: most batches are completions.
    return {
        "id": [o.job_id for o in outcomes],
        "run_lease": [o.run_lease for o in outcomes],
        "state": [o.state.value for o in outcomes],
        "delay": unless_all([o.delay for o in outcomes], None),
        "error": unless_all([o.error for o in outcomes], None),
        "terminal": unless_all([o.terminal for o in outcomes], False),
        "attempt_delta": unless_all([o.attempt_delta for o in outcomes], 0),
        "progress": unless_all([o.progress for o in outcomes], None),
        "callback_id": unless_all([o.callback_id for o in outcomes], None),
        "at": unless_all([o.at for o in outcomes], None),
        "run_at": unless_all([o.run_at for o in outcomes], None),
    }


async def job_finalize_many(
    conn: AsyncConnection[Any], schema: str, outcomes: Sequence[Outcome]
) -> list[JobRow]:
    """Apply outcomes under the lease guard; returns the rows that changed."""
    return await _positional(conn, query("job_finalize_many", schema), _finalize_params(outcomes))


async def job_finalize_many_ids(
    conn: AsyncConnection[Any], schema: str, outcomes: Sequence[Outcome]
) -> list[tuple[int, JobState]]:
    """:func:`job_finalize_many` returning only (id, new state) of the rows that changed."""
    cur = await conn.execute(query("job_finalize_many_ids", schema), _finalize_params(outcomes))
    return [(r[0], JobState(r[1])) for r in await cur.fetchall()]


async def job_rescue_lock(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    staleness: float,
    deadline_grace: float,
    limit: int,
) -> list[tuple[int, int, int, str]]:
    """Lock abandoned attempts: (id, attempt, max_attempts, reason) of each."""
    cur = await conn.execute(
        query("job_rescue_lock", schema),
        {"staleness": staleness, "deadline_grace": deadline_grace, "limit": limit},
    )
    return [(r[0], r[1], r[2], r[3]) for r in await cur.fetchall()]


async def job_rescue_apply(
    conn: AsyncConnection[Any], schema: str, decisions: Sequence[Rescue]
) -> list[tuple[JobRow, str]]:
    """Close the locked attempts as decided; each new row with its reason, by id."""
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
