"""The queries only the worker runs: claim, heartbeats, its runtime record, its settings.

Async only (the sync client never claims or runs jobs); the SQL is in ``jobs.sql`` and
``maintenance.sql``, called by name.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any, LiteralString

from psycopg import AsyncConnection, pq

from wai._db import flow_channel
from wai._flow import FlowState, RateLimit, stored_rate_limit
from wai._job import JobRow, job_rows
from wai._queues import QueueSettings
from wai._sql import query
from wai.worker._floors import NO_FLOORS, Floors, Probe, lsn

__all__ = [
    "followup_specs_upsert",
    "job_claim",
    "job_claim_limited",
    "job_heartbeat_finished",
    "job_heartbeat_many",
    "job_ready_probe",
    "kind_limits_upsert",
    "notify",
    "queue_flow_settings",
    "queue_settings_upsert",
    "runtime_instance_delete",
    "runtime_instance_upsert",
]


@functools.lru_cache(maxsize=1024)
def _claim_query(schema: str, limit: int, name: str = "job_claim") -> LiteralString:
    """job_claim (or job_claim_limited) with its LIMIT written as a literal.

    With ``LIMIT %(limit)s`` a generic plan must guess how many rows the claim takes (a
    tenth of the table), costs far above a custom plan's, and PostgreSQL then plans the
    prepared claim again at every execution. With the number in the text, each limit a
    process uses is its own prepared statement whose generic plan is the custom one:
    planned once per connection.
    """
    text = query(name, schema)
    return text.replace("%(limit)s", str(int(limit)))  # type: ignore[return-value]


def _claim_params(
    queue: str,
    floors: Sequence[int],
    deadlines: dict[str, float],
    default_deadline: float | None,
) -> dict[str, Any]:
    return {
        "queue": queue,
        "floors": list(floors),
        "deadline_kinds": list(deadlines),
        "deadline_seconds": list(deadlines.values()),
        "default_deadline": default_deadline,
    }


async def job_claim(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    queue: str,
    limit: int,
    deadlines: dict[str, float],
    default_deadline: float | None,
    floors: Sequence[int] = NO_FLOORS,
) -> list[JobRow]:
    """Claim up to ``limit`` available jobs of ``queue``, starting an attempt on each,
    walking each priority from its floor (:mod:`wai.worker._floors`).

    Claims nothing from a queue under flow control: see :func:`job_claim_limited`.
    """
    async with conn.cursor(row_factory=job_rows) as cur:
        await cur.execute(
            _claim_query(schema, limit),
            _claim_params(queue, floors, deadlines, default_deadline),
        )
        return await cur.fetchall()


async def job_claim_limited(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    queue: str,
    limit: int,
    deadlines: dict[str, float],
    default_deadline: float | None,
    floors: Sequence[int] = NO_FLOORS,
) -> tuple[list[JobRow], FlowState | None]:
    """Claim from a queue under flow control, in one transaction and one round trip: take
    the queue's claim lock, claim within its rate limit and global concurrency, read what
    is left. The state is None when the queue turned out to have no limits any more."""
    async with conn.transaction(), conn.pipeline():
        lock = await conn.execute(query("queue_flow_lock", schema), {"queue": queue})
        claim = conn.cursor(row_factory=job_rows)
        await claim.execute(
            _claim_query(schema, limit, "job_claim_limited"),
            _claim_params(queue, floors, deadlines, default_deadline),
        )
        after = await conn.execute(query("queue_flow_after", schema), {"queue": queue})
        limits = await lock.fetchone()
        rows = await claim.fetchall()
        left = await after.fetchone()
    if limits is None or left is None:
        return rows, None
    state = FlowState(
        rate_limit=stored_rate_limit(limits[0], limits[1], limits[2]),
        global_concurrency=limits[3],
        tokens=left[0],
        running=left[1],
        at=left[2],
        kind_wait=left[3],
    )
    return rows, state


async def job_ready_probe(
    conn: AsyncConnection[Any], schema: str, *, queue: str, floors: Floors
) -> None:
    """Probe ``queue``'s lanes and move ``floors`` (:mod:`wai.worker._floors`): two
    transactions sent in one pipeline on an autocommit connection, whatever the session's
    isolation level. The first, which takes a transaction id, is an explicit block; the
    second reads in a snapshot taken after the first has ended.

    ``BEGIN`` and ``COMMIT`` go as plain statements. Ending a pipeline's implicit
    transaction with ``COMMIT``/``ROLLBACK`` instead draws a "there is no transaction in
    progress" warning in the server's log at every probe, and psycopg drops every
    statement the connection has prepared when it sees a rollback (its ``rollback()``, a
    ``transaction()`` block rolled back, a ``ROLLBACK`` status), so the claims after each
    probe would be prepared again. The commit writes no data: PostgreSQL does not wait
    for its record to reach the disk."""
    try:
        async with conn.pipeline():
            await conn.execute(b"BEGIN")
            top_cur = await conn.execute(query("job_ready_seq_read", schema))
            xid_cur = await conn.execute(query("job_ready_xid", schema))
            await conn.execute(b"COMMIT")
            fronts_cur = await conn.execute(
                query("job_ready_fronts", schema), {"queue": queue, "floors": list(floors.values)}
            )
            top = await top_cur.fetchone()
            xid = await xid_cur.fetchone()
            seen = await fronts_cur.fetchone()
    except BaseException:
        # A statement of the block failed: the server skipped the rest, and the block is
        # left aborted. End it here rather than hand an aborted connection back.
        if not conn.closed and conn.info.transaction_status != pq.TransactionStatus.IDLE:
            await conn.rollback()
        raise
    if top is None or xid is None or seen is None:  # pragma: no cover - one row each
        raise RuntimeError("a floor probe returned no row")
    floors.settle(
        Probe(top=top[0], xid=int(xid[0]), lsn=lsn(xid[1])),
        seen[0],
        xmin=int(seen[1]),
        flushed=lsn(seen[2]),
        server=seen[3],
    )


async def queue_flow_settings(conn: AsyncConnection[Any], schema: str, queue: str) -> bool:
    """Whether ``queue`` is under flow control (a rate limit, its kinds' or its own, or a
    global concurrency)."""
    cur = await conn.execute(query("queue_flow_settings", schema), {"queue": queue})
    row = await cur.fetchone()
    return row is not None and bool(row[0])


async def notify(conn: AsyncConnection[Any], schema: str, channel: str, payload: str) -> None:
    """Send one note on ``channel`` (the LISTEN probe)."""
    await conn.execute(query("notify", schema), {"channel": channel, "payload": payload})


async def job_heartbeat_many(
    conn: AsyncConnection[Any],
    schema: str,
    attempts: Sequence[tuple[int, int, str | None]],
) -> set[tuple[int, int]]:
    """Refresh heartbeats (and pending progress); returns the attempts still live."""
    cur = await conn.execute(
        query("job_heartbeat_many", schema),
        {
            "id": [a[0] for a in attempts],
            "run_lease": [a[1] for a in attempts],
            "progress": [a[2] for a in attempts],
        },
    )
    return {(r[0], r[1]) for r in await cur.fetchall()}


async def job_heartbeat_finished(
    conn: AsyncConnection[Any], schema: str, attempts: Sequence[tuple[int, int]]
) -> set[int]:
    """Refresh the heartbeat (and clear the deadline) of finished attempts whose rows
    nobody has locked, never waiting and never writing progress; returns the ids refreshed."""
    cur = await conn.execute(
        query("job_heartbeat_finished", schema),
        {"id": [a[0] for a in attempts], "run_lease": [a[1] for a in attempts]},
    )
    return {r[0] for r in await cur.fetchall()}


async def runtime_instance_upsert(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    instance_id: str,
    hostname: str,
    pid: int,
    version: str,
    role: str,
    queues: dict[str, int],
    concurrency: int,
    in_flight: int,
    leader: bool,
    healthy: bool,
    health: dict[str, Any],
    specs: list[dict[str, str]],
) -> None:
    """Create or refresh the record of one live process (with the follow-up specs it holds)."""
    await conn.execute(
        query("runtime_instance_upsert", schema),
        {
            "instance_id": instance_id,
            "hostname": hostname,
            "pid": pid,
            "version": version,
            "role": role,
            "queues": json.dumps(queues),
            "concurrency": concurrency,
            "in_flight": in_flight,
            "leader": leader,
            "healthy": healthy,
            "health": json.dumps(health),
            "specs": json.dumps(specs),
        },
    )


async def runtime_instance_delete(
    conn: AsyncConnection[Any], schema: str, instance_id: str
) -> None:
    """Remove the record of a process that shuts down."""
    await conn.execute(query("runtime_instance_delete", schema), {"instance_id": instance_id})


async def followup_specs_upsert(
    conn: AsyncConnection[Any], schema: str, pairs: Sequence[tuple[str, str]]
) -> None:
    """Record the (kind, outcome) pairs a starting runtime holds follow-up specs for."""
    await conn.execute(
        query("followup_specs_upsert", schema),
        {"kind": [k for k, _ in pairs], "outcome": [o for _, o in pairs]},
    )


async def queue_settings_upsert(
    conn: AsyncConnection[Any], schema: str, settings: Sequence[QueueSettings]
) -> None:
    """Store per-queue settings given in code; a None keeps the stored value."""
    await conn.execute(
        query("queue_settings_upsert", schema),
        {
            "name": [s.name for s in settings],
            "retention": [s.retention for s in settings],
            "aging": [s.priority_aging for s in settings],
            "dlq": [s.dlq for s in settings],
            "dlq_retention": [s.dlq_retention for s in settings],
            "rate_limit": [s.rate_limit.limit if s.rate_limit else None for s in settings],
            "rate_per": [s.rate_limit.per if s.rate_limit else None for s in settings],
            "rate_burst": [s.rate_limit.capacity if s.rate_limit else None for s in settings],
            "global_concurrency": [s.global_concurrency for s in settings],
            "retry_holds_key": [s.retry_holds_key for s in settings],
            "flow_channel": flow_channel(schema),
        },
    )


async def kind_limits_upsert(
    conn: AsyncConnection[Any], schema: str, limits: Sequence[tuple[str, str, RateLimit]]
) -> None:
    """Store the rate limits of kinds within queues given in code (queue, kind, limit)."""
    await conn.execute(
        query("kind_limits_upsert", schema),
        {
            "queue": [q for q, _, _ in limits],
            "kind": [k for _, k, _ in limits],
            "rate_limit": [r.limit for _, _, r in limits],
            "rate_per": [r.per for _, _, r in limits],
            "rate_burst": [r.capacity for _, _, r in limits],
            "flow_channel": flow_channel(schema),
        },
    )
