"""The queries only maintenance runs: leader election, promotion, cleanup, aging,
statistics and the collection of dead runtime records.

Async only (the sync client runs no maintenance); the SQL is in ``jobs.sql``,
``leader.sql`` and ``maintenance.sql``, called by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import psycopg
from psycopg import AsyncConnection, sql
from psycopg.types.json import Jsonb

from wai._db_async import channel
from wai._sql import query, validate_schema
from wai._tally import Key

__all__ = [
    "depth_delete_old",
    "depth_record",
    "job_age_priority",
    "job_delete_finalized",
    "job_promote_due",
    "jobs_index_drop",
    "jobs_index_rebuild",
    "jobs_index_sizes",
    "jobs_rebuild_state",
    "jobs_table_analyze",
    "jobs_table_stats",
    "leader_attempt_elect",
    "leader_resign",
    "outbox_delete_expired",
    "runtime_instance_delete_stale",
    "throughput_add",
    "throughput_delete_old",
]


async def leader_attempt_elect(
    conn: AsyncConnection[Any], schema: str, *, name: str, leader_id: str, ttl: float
) -> datetime | None:
    """Take or renew leadership; the election time when this process leads, else None."""
    cur = await conn.execute(
        query("leader_attempt_elect", schema), {"name": name, "leader_id": leader_id, "ttl": ttl}
    )
    row = await cur.fetchone()
    return row[1] if row else None


async def leader_resign(
    conn: AsyncConnection[Any], schema: str, *, name: str, leader_id: str
) -> None:
    """Give leadership up so another process can take it at once."""
    await conn.execute(query("leader_resign", schema), {"name": name, "leader_id": leader_id})


async def job_promote_due(
    conn: AsyncConnection[Any], schema: str, limit: int
) -> tuple[dict[str, int], float | None]:
    """Promote due scheduled/retryable jobs: how many per queue, and the seconds until
    the next one left is due (None: no job is scheduled; 0 or less: one is due now)."""
    cur = await conn.execute(
        query("job_promote_due", schema), {"limit": limit, "channel": channel(schema)}
    )
    row = await cur.fetchone()
    if row is None:  # the statement always returns its row; be safe all the same
        return {}, None
    counts, due_in = row
    return {str(q): int(n) for q, n in counts.items()}, due_in


async def runtime_instance_delete_stale(
    conn: AsyncConnection[Any], schema: str, *, default_interval: float, min_age: float
) -> list[str]:
    """Remove the records of processes presumed dead; returns their instance ids."""
    cur = await conn.execute(
        query("runtime_instance_delete_stale", schema),
        {"default_interval": default_interval, "min_age": min_age},
    )
    return [r[0] for r in await cur.fetchall()]


async def jobs_table_stats(
    conn: AsyncConnection[Any], schema: str
) -> tuple[float, int, float | None]:
    """(reltuples, rows changed since the last analyze, seconds since autovacuum last
    analyzed it or None) of the jobs table."""
    cur = await conn.execute(
        query("jobs_table_stats", schema), {"table": f'"{validate_schema(schema)}".jobs'}
    )
    row = await cur.fetchone()
    if row is None:
        return (-1.0, 0, None)
    return (float(row[0]), int(row[1]), None if row[2] is None else float(row[2]))


async def jobs_table_analyze(conn: AsyncConnection[Any], schema: str, *, lock_wait: float) -> bool:
    """ANALYZE the jobs table unless another session holds it (a vacuum, an analyze) for
    more than ``lock_wait`` seconds; whether it ran."""
    try:
        async with conn.transaction():
            await conn.execute(
                query("lock_wait_local", schema),
                {"timeout": f"{max(1, round(lock_wait * 1000))}ms"},
            )
            await conn.execute(query("jobs_table_analyze", schema))
    except psycopg.errors.LockNotAvailable:
        return False
    return True


async def jobs_index_sizes(
    conn: AsyncConnection[Any], schema: str
) -> list[tuple[str, bool, int, float, float]]:
    """Per index of the jobs table: (name, valid, bytes, entries at the last vacuum or
    analyze, estimated bytes an entry takes)."""
    cur = await conn.execute(
        query("jobs_index_sizes", schema), {"table": f'"{validate_schema(schema)}".jobs'}
    )
    return [
        (str(r[0]), bool(r[1]), int(r[2]), float(r[3]), float(r[4])) for r in await cur.fetchall()
    ]


async def jobs_rebuild_state(conn: AsyncConnection[Any], schema: str) -> tuple[float, int, int]:
    """(seconds since the oldest transaction of this database holding a snapshot began,
    0 if none is seen; how many vacuums of the jobs table have ended; its heap's bytes)."""
    cur = await conn.execute(
        query("jobs_rebuild_state", schema), {"table": f'"{validate_schema(schema)}".jobs'}
    )
    row = await cur.fetchone()
    assert row is not None  # a SELECT without FROM returns its row
    return float(row[0]), int(row[1]), int(row[2])


async def jobs_index_rebuild(conn: AsyncConnection[Any], schema: str, index: str) -> None:
    """``REINDEX INDEX CONCURRENTLY`` an index of the jobs table (on an autocommit
    connection: it refuses a transaction block; an interrupted one leaves an invalid
    ``<index>_ccnew`` behind for :func:`jobs_index_drop`)."""
    statement = sql.SQL(query("jobs_index_rebuild", schema)).format(index=sql.Identifier(index))
    await conn.execute(statement, prepare=False)


async def jobs_index_drop(conn: AsyncConnection[Any], schema: str, index: str) -> None:
    """``DROP INDEX CONCURRENTLY IF EXISTS`` an index of the jobs table (autocommit)."""
    statement = sql.SQL(query("jobs_index_drop", schema)).format(index=sql.Identifier(index))
    await conn.execute(statement, prepare=False)


async def job_delete_finalized(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    completed: float,
    failed: float,
    cancelled: float,
    limit: int,
    after: datetime | None = None,
) -> tuple[dict[str, int], datetime | None]:
    """Delete up to ``limit`` terminal jobs past their retention, finalized at or after
    ``after`` when given; returns counts per state and the latest finalized_at deleted."""
    cur = await conn.execute(
        query("job_delete_finalized", schema),
        {
            "completed": completed,
            "failed": failed,
            "cancelled": cancelled,
            "limit": limit,
            "after": after,
        },
    )
    rows = await cur.fetchall()
    return {r[0]: r[1] for r in rows}, max((r[2] for r in rows), default=None)


async def outbox_delete_expired(
    conn: AsyncConnection[Any], schema: str, *, retention: float, limit: int
) -> int:
    """Delete up to ``limit`` outbox rows older than ``retention`` seconds; returns the count."""
    cur = await conn.execute(
        query("outbox_delete_expired", schema), {"retention": retention, "limit": limit}
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def job_age_priority(conn: AsyncConnection[Any], schema: str, limit: int) -> dict[str, int]:
    """Raise the priority of long-waiting jobs of aging queues; returns counts per queue."""
    cur = await conn.execute(query("job_age_priority", schema), {"limit": limit})
    return {r[0]: r[1] for r in await cur.fetchall()}


async def depth_record(conn: AsyncConnection[Any], schema: str, live: list[dict[str, Any]]) -> None:
    """Store one depth sample: each record's ``name``, ``counts`` and ``oldest_available_lag``."""
    await conn.execute(
        query("depth_record", schema),
        {
            "queue": [r["name"] for r in live],
            "counts": [Jsonb(r["counts"]) for r in live],
            "lag": [float(r["oldest_available_lag"]) for r in live],
        },
    )


async def depth_delete_old(conn: AsyncConnection[Any], schema: str, retention: float) -> int:
    """Delete depth samples older than ``retention`` seconds; returns how many."""
    cur = await conn.execute(query("depth_delete_old", schema), {"retention": retention})
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def throughput_add(
    conn: AsyncConnection[Any], schema: str, counts: Mapping[Key, int]
) -> None:
    """Add per-minute counts (sorted by key) to the ``throughput`` table."""
    keys = list(counts)
    await conn.execute(
        query("throughput_add", schema),
        {
            "minute": [k[0] for k in keys],
            "queue": [k[1] for k in keys],
            "kind": [k[2] for k in keys],
            "event": [k[3] for k in keys],
            "n": list(counts.values()),
        },
    )


async def throughput_delete_old(conn: AsyncConnection[Any], schema: str, retention: float) -> int:
    """Delete throughput counts of minutes older than ``retention`` seconds; how many rows."""
    cur = await conn.execute(query("throughput_delete_old", schema), {"retention": retention})
    row = await cur.fetchone()
    return int(row[0]) if row else 0
