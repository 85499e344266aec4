"""Periodic schedules' queries (``sql/queries/cron.sql``): typed values in, models out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from wai._db_async import channel
from wai._inserts import NewJob
from wai._job import JobRow
from wai._sql import query
from wai.cron._models import Periodic, Schedule

__all__ = [
    "ActiveSchedule",
    "FiredJob",
    "cron_active",
    "cron_delete",
    "cron_fire",
    "cron_get",
    "cron_list",
    "cron_pause",
    "cron_resume",
    "cron_trigger",
    "cron_upsert",
]


@dataclass(frozen=True, slots=True)
class ActiveSchedule:
    """What the firing pass reads of a schedule that is not paused."""

    name: str
    expr: str
    timezone: str
    missed_fire_policy: str
    cursor_at: datetime


@dataclass(frozen=True, slots=True)
class FiredJob:
    """A job that a fire enqueued, as inserted (for the log line of the fire)."""

    id: int
    kind: str
    queue: str
    attempt: int
    max_attempts: int


async def cron_upsert(
    conn: AsyncConnection[Any], schema: str, items: Sequence[tuple[Periodic, NewJob]]
) -> None:
    """Create or update schedules by name; cursors and pauses are kept."""
    if not items:
        return
    await conn.execute(
        query("cron_upsert", schema),
        {
            "name": [p.name for p, _ in items],
            "expr": [p.expr.expr for p, _ in items],
            "timezone": [p.timezone for p, _ in items],
            "kind": [j.kind for _, j in items],
            "queue": [j.queue for _, j in items],
            "args": [j.args for _, j in items],
            "priority": [j.priority for _, j in items],
            "max_attempts": [j.max_attempts for _, j in items],
            "tags": [json.dumps(j.tags) for _, j in items],
            "metadata": [j.metadata for _, j in items],
            "policy": [p.missed_fire_policy for p, _ in items],
        },
    )


async def cron_active(
    conn: AsyncConnection[Any], schema: str
) -> tuple[datetime | None, list[ActiveSchedule]]:
    """The database clock and every schedule that is not paused (clock None: none)."""
    cur = await conn.execute(query("cron_active", schema))
    rows = await cur.fetchall()
    now = rows[0][0] if rows else None
    return now, [ActiveSchedule(*r[1:]) for r in rows]


async def cron_fire(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    name: str,
    expected: datetime,
    fires: Sequence[datetime],
) -> list[FiredJob]:
    """Enqueue ``fires`` if the cursor still is ``expected``; returns the new jobs, by id.

    An empty result means another process fired (or paused) the schedule first.
    """
    cur = await conn.execute(
        query("cron_fire", schema),
        {
            "name": name,
            "expected": expected,
            "cursor": fires[-1],
            "fire_at": list(fires),
            "fire_label": [f.astimezone(UTC).isoformat() for f in fires],
            "channel": channel(schema),
        },
    )
    return [FiredJob(*r) for r in await cur.fetchall()]


async def _schedule(
    conn: AsyncConnection[Any], name: str, schema: str, params: dict[str, Any]
) -> Schedule | None:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query(name, schema), params)
        rec = await cur.fetchone()
    return Schedule.from_record(rec, rec["now"]) if rec is not None else None


async def cron_list(conn: AsyncConnection[Any], schema: str) -> list[Schedule]:
    """Every stored schedule by name."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("cron_list", schema))
        return [Schedule.from_record(r, r["now"]) for r in await cur.fetchall()]


async def cron_get(conn: AsyncConnection[Any], schema: str, name: str) -> Schedule | None:
    """One schedule by name."""
    return await _schedule(conn, "cron_get", schema, {"name": name})


async def cron_pause(conn: AsyncConnection[Any], schema: str, name: str) -> Schedule | None:
    """Pause a schedule (a paused one stays paused since its first pause)."""
    return await _schedule(conn, "cron_pause", schema, {"name": name})


async def cron_resume(conn: AsyncConnection[Any], schema: str, name: str) -> Schedule | None:
    """Resume a schedule."""
    return await _schedule(conn, "cron_resume", schema, {"name": name})


async def cron_delete(conn: AsyncConnection[Any], schema: str, name: str) -> bool:
    """Delete a schedule; False when there was none."""
    cur = await conn.execute(query("cron_delete", schema), {"name": name})
    return await cur.fetchone() is not None


async def cron_trigger(conn: AsyncConnection[Any], schema: str, name: str) -> JobRow | None:
    """Enqueue one job of the schedule now; None when there is no such schedule."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("cron_trigger", schema), {"name": name, "channel": channel(schema)})
        rec = await cur.fetchone()
    return JobRow.from_record(rec) if rec is not None else None
