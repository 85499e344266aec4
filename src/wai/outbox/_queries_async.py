"""The outbox's queries (``sql/queries/outbox.sql``): typed values in, models out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection
from psycopg.rows import dict_row

from wai._sql import query
from wai.outbox._models import OutboxEntry, OutboxStats

__all__ = [
    "outbox_backoff",
    "outbox_delete",
    "outbox_discard",
    "outbox_dispatched_specs",
    "outbox_insert_many",
    "outbox_list",
    "outbox_lock_due",
    "outbox_next_due",
    "outbox_retry",
    "outbox_stats",
]


async def outbox_lock_due(
    conn: AsyncConnection[Any], schema: str, *, pairs: Sequence[tuple[str, str]], limit: int
) -> list[dict[str, Any]]:
    """Lock due outbox rows of the given (kind, outcome) pairs (in the caller's transaction)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            query("outbox_lock_due", schema),
            {"kinds": [p[0] for p in pairs], "outcomes": [p[1] for p in pairs], "limit": limit},
        )
        return await cur.fetchall()


async def outbox_next_due(
    conn: AsyncConnection[Any], schema: str, *, pairs: Sequence[tuple[str, str]]
) -> float | None:
    """Seconds until the next pending row of the given (kind, outcome) pairs is due
    (at most 0: due now; None: no row is pending)."""
    cur = await conn.execute(
        query("outbox_next_due", schema),
        {"kinds": [p[0] for p in pairs], "outcomes": [p[1] for p in pairs]},
    )
    row = await cur.fetchone()
    return None if row is None or row[0] is None else float(row[0])


async def outbox_dispatched_specs(
    conn: AsyncConnection[Any], schema: str, *, job_id: int, run_lease: int, outcome: str
) -> set[str]:
    """Names of the specs whose follow-up already exists for one trigger attempt."""
    cur = await conn.execute(
        query("outbox_dispatched_specs", schema),
        {"job_id": job_id, "run_lease": run_lease, "outcome": outcome},
    )
    return {r[0] for r in await cur.fetchall()}


async def outbox_delete(conn: AsyncConnection[Any], schema: str, *, outbox_id: int) -> None:
    """Remove a dispatched outbox row."""
    await conn.execute(query("outbox_delete", schema), {"id": outbox_id})


async def outbox_backoff(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    outbox_id: int,
    error: str,
    delay: float,
    max_attempts: int,
) -> None:
    """Record a failed dispatch: retried ``delay`` seconds later, or failed at ``max_attempts``."""
    await conn.execute(
        query("outbox_backoff", schema),
        {"id": outbox_id, "error": error, "delay": delay, "max_attempts": max_attempts},
    )


async def outbox_list(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    state: str | None = None,
    kind: str | None = None,
    after: int | None = None,
    limit: int,
) -> list[OutboxEntry]:
    """Outbox rows (all, ``pending`` or ``failed``; of one kind), oldest first."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            query("outbox_list", schema),
            {"state": state, "kind": kind, "after": after, "limit": limit},
        )
        return [OutboxEntry.from_record(r) for r in await cur.fetchall()]


async def outbox_stats(conn: AsyncConnection[Any], schema: str) -> OutboxStats:
    """How many outbox rows are pending and failed."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("outbox_stats", schema))
        rec = await cur.fetchone()
    assert rec is not None  # an aggregate always returns its row
    return OutboxStats.from_record(rec)


async def outbox_retry(
    conn: AsyncConnection[Any], schema: str, *, outbox_id: int
) -> OutboxEntry | None:
    """Make one outbox row pending and due now, attempts reset; None when it does not exist."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("outbox_retry", schema), {"id": outbox_id})
        rec = await cur.fetchone()
    return OutboxEntry.from_record(rec) if rec is not None else None


async def outbox_discard(conn: AsyncConnection[Any], schema: str, *, outbox_id: int) -> bool:
    """Delete one outbox row; whether it existed."""
    cur = await conn.execute(query("outbox_discard", schema), {"id": outbox_id})
    return await cur.fetchone() is not None


async def outbox_insert_many(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    outcome: str,
    details: Sequence[tuple[int, dict[str, Any]]],
) -> None:
    """Leave the outbox rows of ``outcome`` transitions made in this transaction.

    ``details`` pairs each job id with the detail its follow-ups receive.
    """
    if not details:
        return
    await conn.execute(
        query("outbox_insert_many", schema),
        {
            "outcome": outcome,
            "id": [job_id for job_id, _ in details],
            "detail": [json.dumps(detail) for _, detail in details],
        },
    )
