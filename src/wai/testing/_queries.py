"""The queries only wai.testing runs: claim one job by id, and what a drain has left.

Async only, like the worker's; the SQL is in ``testing.sql``, called by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection

from wai._job import JobRow, job_rows
from wai._sql import query

__all__ = ["Left", "job_claim_id", "job_left_in_queues", "job_make_due"]


async def job_claim_id(
    conn: AsyncConnection[Any], schema: str, job_id: int, *, deadline: float | None
) -> JobRow | None:
    """Claim job ``job_id`` if it is available, due and its queue not paused; its row."""
    async with conn.cursor(row_factory=job_rows) as cur:
        await cur.execute(query("job_claim_id", schema), {"id": job_id, "deadline": deadline})
        return await cur.fetchone()


async def job_make_due(conn: AsyncConnection[Any], schema: str, job_id: int) -> bool:
    """Make job ``job_id`` available now if it is scheduled or retryable; whether it was."""
    cur = await conn.execute(query("job_make_due", schema), {"id": job_id})
    return await cur.fetchone() is not None


@dataclass(frozen=True, slots=True)
class Left:
    """A job a worker would still run: what a drain that timed out lists."""

    id: int
    kind: str
    queue: str
    state: str
    run_at: datetime


async def job_left_in_queues(
    conn: AsyncConnection[Any], schema: str, queues: Sequence[str], *, limit: int
) -> list[Left]:
    """Up to ``limit`` jobs of ``queues`` still to run (available, running, or due)."""
    cur = await conn.execute(
        query("job_left_in_queues", schema), {"queues": list(queues), "limit": limit}
    )
    return [Left(*row) for row in await cur.fetchall()]
