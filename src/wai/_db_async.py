"""The database seam: one function per named query, typed values in, models out."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row

from wai._sql import query, validate_schema
from wai.inserts import NewJob
from wai.job import JobRow
from wai.migrate import Migration, ledger_sql, lock_key, pending
from wai.outcomes import Outcome

__all__ = [
    "job_claim",
    "job_finalize_many",
    "job_get",
    "job_get_by_unique_key",
    "job_heartbeat_many",
    "job_insert",
    "job_insert_many",
    "job_list",
    "job_promote_due",
    "job_rescue",
    "leader_attempt_elect",
    "leader_resign",
    "migrate_applied",
    "migrate_apply",
]


def channel(schema: str) -> str:
    """The NOTIFY channel that wakes the workers of ``schema``."""
    return f"{validate_schema(schema)}.jobs"


async def _rows(
    conn: AsyncConnection[Any], name: str, schema: str, params: dict[str, Any]
) -> list[JobRow]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query(name, schema), params)
        return [JobRow.from_record(r) for r in await cur.fetchall()]


def _job_params(job: NewJob) -> dict[str, Any]:
    trig = job.trigger
    return {
        "kind": job.kind,
        "queue": job.queue,
        "args": job.args,
        "state": job.state,
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "run_at": job.run_at,
        "tags": job.tags,
        "metadata": job.metadata,
        "unique_key": job.unique_key,
        "unique_states": job.unique_states,
        "ordering_key": job.ordering_key,
        "trigger_job_id": trig[0] if trig else None,
        "trigger_run_lease": trig[1] if trig else None,
        "trigger_outcome": trig[2] if trig else None,
        "trigger_spec": trig[3] if trig else None,
    }


async def migrate_applied(conn: AsyncConnection[Any], schema: str) -> set[int]:
    """Versions already applied to ``schema`` (empty when the schema is missing)."""
    cur = await conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f'"{validate_schema(schema)}".migrations',)
    )
    row = await cur.fetchone()
    if not row or not row[0]:
        return set()
    cur = await conn.execute(
        sql.SQL("SELECT version FROM {s}.migrations").format(s=sql.Identifier(schema))
    )
    return {r[0] for r in await cur.fetchall()}


async def migrate_apply(conn: AsyncConnection[Any], schema: str) -> list[Migration]:
    """Apply pending migrations in one transaction under the migration lock."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
        await conn.execute(ledger_sql(schema))
        todo = pending(await migrate_applied(conn, schema))
        for m in todo:
            await conn.execute(sql.SQL(m.rendered(schema)))  # pyright: ignore[reportArgumentType]
            await conn.execute(
                sql.SQL("INSERT INTO {s}.migrations (version, name) VALUES (%s, %s)").format(
                    s=sql.Identifier(schema)
                ),
                (m.version, m.name),
            )
    return todo


async def job_insert(conn: AsyncConnection[Any], schema: str, job: NewJob) -> JobRow | None:
    """Insert one job; None when its unique key is already held."""
    params = _job_params(job)
    params["channel"] = channel(schema)
    rows = await _rows(conn, "job_insert", schema, params)
    return rows[0] if rows else None


async def job_insert_many(
    conn: AsyncConnection[Any], schema: str, jobs: Sequence[NewJob]
) -> list[JobRow]:
    """Insert jobs in one statement, in order; rows whose unique key is held are skipped."""
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "kind",
            "queue",
            "args",
            "state",
            "priority",
            "max_attempts",
            "run_at",
            "tags",
            "metadata",
            "unique_key",
            "unique_states",
            "ordering_key",
            "trigger_job_id",
            "trigger_run_lease",
            "trigger_outcome",
            "trigger_spec",
        )
    }
    for job in jobs:
        p = _job_params(job)
        p["tags"] = json.dumps(job.tags)
        p["unique_states"] = json.dumps(job.unique_states) if job.unique_states else None
        for k, values in cols.items():
            values.append(p[k])
    params: dict[str, Any] = dict(cols)
    params["channel"] = channel(schema)
    return await _rows(conn, "job_insert_many", schema, params)


async def job_get_by_unique_key(
    conn: AsyncConnection[Any], schema: str, unique_key: bytes
) -> JobRow | None:
    """The job holding ``unique_key``, if any."""
    rows = await _rows(conn, "job_get_by_unique_key", schema, {"unique_key": unique_key})
    return rows[0] if rows else None


async def job_get(conn: AsyncConnection[Any], schema: str, job_id: int) -> JobRow | None:
    """One job by id."""
    rows = await _rows(conn, "job_get", schema, {"id": job_id})
    return rows[0] if rows else None


async def job_list(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    state: str | None,
    kind: str | None,
    queue: str | None,
    tag: str | None,
    trigger_job_id: int | None,
    before_id: int | None,
    limit: int,
) -> list[JobRow]:
    """Jobs newest first, filtered."""
    return await _rows(
        conn,
        "job_list",
        schema,
        {
            "state": state,
            "kind": kind,
            "queue": queue,
            "tag": tag,
            "trigger_job_id": trigger_job_id,
            "before_id": before_id,
            "limit": limit,
        },
    )


async def job_claim(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    queue: str,
    limit: int,
    deadlines: dict[str, float],
    default_deadline: float | None,
) -> list[JobRow]:
    """Claim up to ``limit`` available jobs of ``queue``, starting an attempt on each."""
    return await _rows(
        conn,
        "job_claim",
        schema,
        {
            "queue": queue,
            "limit": limit,
            "deadline_kinds": list(deadlines),
            "deadline_seconds": list(deadlines.values()),
            "default_deadline": default_deadline,
        },
    )


async def job_finalize_many(
    conn: AsyncConnection[Any], schema: str, outcomes: Sequence[Outcome]
) -> list[JobRow]:
    """Apply outcomes under the lease guard; returns the rows that changed."""
    return await _rows(
        conn,
        "job_finalize_many",
        schema,
        {
            "id": [o.job_id for o in outcomes],
            "run_lease": [o.run_lease for o in outcomes],
            "state": [o.state.value for o in outcomes],
            "delay": [o.delay for o in outcomes],
            "error": [o.error for o in outcomes],
            "terminal": [o.terminal for o in outcomes],
            "attempt_delta": [o.attempt_delta for o in outcomes],
            "progress": [o.progress for o in outcomes],
        },
    )


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


async def job_promote_due(conn: AsyncConnection[Any], schema: str, limit: int) -> dict[str, int]:
    """Promote due scheduled/retryable jobs; returns how many per queue."""
    cur = await conn.execute(
        query("job_promote_due", schema), {"limit": limit, "channel": channel(schema)}
    )
    return {r[0]: r[1] for r in await cur.fetchall()}


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


async def job_rescue(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    staleness: float,
    deadline_grace: float,
    limit: int,
) -> list[tuple[JobRow, str]]:
    """Rescue dead, overdue and timed-out attempts; returns each row with its reason."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            query("job_rescue", schema),
            {"staleness": staleness, "deadline_grace": deadline_grace, "limit": limit},
        )
        return [(JobRow.from_record(r), r["rescue_reason"]) for r in await cur.fetchall()]
