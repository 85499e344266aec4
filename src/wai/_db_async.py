"""The database seam of jobs, queues, leadership and maintenance: one function per named query.

The queries of ``jobs.sql``, ``admin.sql``, ``leader.sql`` and ``maintenance.sql``; each feature
package (:mod:`wai.dlq`, :mod:`wai.cron`, :mod:`wai.outbox`, :mod:`wai.callbacks`) has its own.
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Sequence
from datetime import datetime
from typing import Any, LiteralString

from psycopg import AsyncConnection, sql
from psycopg.rows import RowMaker, dict_row, tuple_row

from wai._admin import QueueStats
from wai._inserts import NewJob, inserted_row
from wai._instances import RuntimeInstance
from wai._job import JobRow, JobState
from wai._migrate import Migration, ledger_sql, lock_key, pending
from wai._outcomes import Outcome
from wai._queues import QueueSettings
from wai._sql import query, validate_schema

__all__ = [
    "cancel_channel",
    "channel",
    "followup_specs_upsert",
    "job_age_priority",
    "job_cancel",
    "job_claim",
    "job_copy",
    "job_delete_finalized",
    "job_finalize_many",
    "job_finalize_many_ids",
    "job_get",
    "job_get_by_unique_key",
    "job_heartbeat_finished",
    "job_heartbeat_many",
    "job_insert",
    "job_insert_many",
    "job_insert_many_ids",
    "job_list",
    "job_notify_queues",
    "job_promote_due",
    "job_rescue",
    "job_retry",
    "jobs_table_analyze",
    "jobs_table_stats",
    "leader_attempt_elect",
    "leader_resign",
    "migrate_applied",
    "migrate_apply",
    "outbox_delete_expired",
    "queue_drain",
    "queue_pause",
    "queue_resume",
    "queue_settings_upsert",
    "queue_stats",
    "runtime_instance_delete",
    "runtime_instance_delete_stale",
    "runtime_instance_list",
    "runtime_instance_upsert",
]


def channel(schema: str) -> str:
    """The NOTIFY channel that wakes the workers of ``schema``."""
    return f"{validate_schema(schema)}.jobs"


def cancel_channel(schema: str) -> str:
    """The NOTIFY channel that tells workers of ``schema`` to stop an attempt.

    The payload is ``{"job_id": ..., "run_lease": ...}``.
    """
    return f"{validate_schema(schema)}.cancel"


async def _rows(
    conn: AsyncConnection[Any],
    name: str,
    schema: str,
    params: dict[str, Any],
    *,
    prepare: bool | None = None,
) -> list[JobRow]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query(name, schema), params, prepare=prepare)
        return [JobRow.from_record(r) for r in await cur.fetchall()]


def _job_rows(_cursor: object) -> RowMaker[JobRow]:
    """Row factory: each row of a claim or finalize (``ROW_COLUMNS`` first) as a JobRow."""
    return JobRow.from_row


async def _positional(
    conn: AsyncConnection[Any], text: LiteralString, params: dict[str, Any]
) -> list[JobRow]:
    """Run ``text``, whose RETURNING starts with ``ROW_COLUMNS``; its rows as JobRows."""
    async with conn.cursor(row_factory=_job_rows) as cur:
        await cur.execute(text, params)
        return await cur.fetchall()


async def _inserted(
    conn: AsyncConnection[Any], name: str, schema: str, params: dict[str, Any]
) -> list[tuple[Any, ...]]:
    """Run an insert query, whose RETURNING starts with ``INSERT_COLUMNS``; rows by id."""
    async with conn.cursor(row_factory=tuple_row) as cur:  # whatever the connection's factory
        await cur.execute(query(name, schema), params)
        rows = await cur.fetchall()
    rows.sort(key=_first)  # RETURNING has no order of its own; ids follow the input order
    return rows


_first = operator.itemgetter(0)


def _job_params(job: NewJob) -> dict[str, Any]:
    """The parameters of job_insert; empty tags as NULL (psycopg dumps a list in Python)."""
    trig = job.trigger
    return {
        "kind": job.kind,
        "queue": job.queue,
        "args": job.args,
        "state": job.state,
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "run_at": job.run_at,
        "tags": job.tags or None,
        "metadata": job.metadata,
        "unique_key": job.unique_key,
        "unique_states": job.unique_states,
        "ordering_key": job.ordering_key,
        "trigger_job_id": trig[0] if trig else None,
        "trigger_run_lease": trig[1] if trig else None,
        "trigger_outcome": trig[2] if trig else None,
        "trigger_spec": trig[3] if trig else None,
    }


#: The NewJob fields that job_insert_many sends, one JSON array each.
_BATCH_FIELDS = operator.attrgetter(
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
    "trigger",
)

_encode_column = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _unless_all(values: Sequence[Any], default: object) -> Sequence[Any] | None:
    """``values``, or None (a NULL array or document) when each one is ``default``."""
    return None if values.count(default) == len(values) else values


def _column(values: Sequence[Any], default: object = None) -> str | None:
    """``values`` as one JSON array; None (SQL NULL) when each value is ``default``.

    ROWS FROM pads the empty result of ``jsonb_array_elements(NULL)`` with NULLs, so a
    column that no job of the batch sets costs neither its encoding nor its parse.
    """
    kept = _unless_all(values, default)
    return None if kept is None else _encode_column(kept)


def _batch_params(jobs: Sequence[NewJob]) -> dict[str, Any]:
    """The parameters of job_insert_many: per column, one JSON array with an element per job.

    Each array is one C-level encode (args and metadata are already JSON: they are joined),
    which costs far less than psycopg's per-element quoting of text arrays.
    """
    (
        kind,
        queue,
        args,
        state,
        priority,
        max_attempts,
        run_at,
        tags,
        metadata,
        unique_key,
        unique_states,
        ordering_key,
        trigger,
    ) = zip(*map(_BATCH_FIELDS, jobs), strict=True)
    return {
        "kind": _encode_column(kind),
        "queue": _encode_column(queue),
        "args": f"[{','.join(args)}]",
        "state": _encode_column(state),
        "priority": _encode_column(priority),
        "max_attempts": _encode_column(max_attempts),
        "run_at": _column([t if t is None else t.isoformat() for t in run_at]),
        "tags": _column(tags, []),
        "metadata": None if metadata.count("{}") == len(metadata) else f"[{','.join(metadata)}]",
        "unique_key": _column([k if k is None else k.hex() for k in unique_key]),
        "unique_states": _column(unique_states),
        "ordering_key": _column(ordering_key),
        "trigger": _column(trigger),
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
    name = "job_insert" if job.unique_key is None else "job_insert_unique"
    rows = await _inserted(conn, name, schema, params)
    if not rows:
        return None
    id_, run_at, created_at, *_ = rows[0]
    return inserted_row(job, id_, run_at, created_at)


async def job_insert_many(
    conn: AsyncConnection[Any], schema: str, jobs: Sequence[NewJob]
) -> list[JobRow | None]:
    """Insert jobs in one statement; a row per job, in order, None where its unique key
    is already held."""
    inserted = await job_insert_many_ids(conn, schema, jobs)
    return [
        None if r is None else inserted_row(job, r[0], r[1], r[2])
        for job, r in zip(jobs, inserted, strict=True)
    ]


async def job_insert_many_ids(
    conn: AsyncConnection[Any], schema: str, jobs: Sequence[NewJob]
) -> list[tuple[Any, ...] | None]:
    """:func:`job_insert_many` without building the rows: per job, in order, what the
    server returned of it (``INSERT_COLUMNS``), None where its unique key is already held."""
    if not jobs:
        return []
    params = _batch_params(jobs)
    params["channel"] = channel(schema)
    unique = any(job.unique_key is not None for job in jobs)
    rows = await _inserted(
        conn, "job_insert_many_unique" if unique else "job_insert_many", schema, params
    )
    if len(rows) == len(jobs):
        return list(rows)
    out: list[tuple[Any, ...] | None] = []
    pos = 0
    for job in jobs:
        # the rows come in input order; a skipped job is a unique one whose key was held
        if pos < len(rows) and (job.unique_key is None or rows[pos][3] == job.unique_key):
            out.append(rows[pos])
            pos += 1
        else:
            out.append(None)
    return out


async def job_copy(conn: AsyncConnection[Any], schema: str, jobs: Sequence[NewJob]) -> int:
    """COPY ``jobs`` (none with a unique key) into the jobs table; the rows written.

    Two COPY statements when some jobs carry a ``run_at`` and others take the default.
    """
    written = 0
    async with conn.cursor() as cur:
        for name, scheduled in (("job_copy", False), ("job_copy_scheduled", True)):
            group = [job for job in jobs if (job.run_at is not None) is scheduled]
            if not group:
                continue
            async with cur.copy(query(name, schema)) as copy:
                for job in group:
                    row = _copy_row(job)
                    await copy.write_row((*row, job.run_at) if scheduled else row)
            written += cur.rowcount
    return written


def _copy_row(job: NewJob) -> tuple[Any, ...]:
    """The job_copy columns of ``job``, in their order."""
    assert job.unique_key is None, "COPY cannot check unique keys"
    assert job.trigger is None, "follow-ups are inserted with their outcome, never copied"
    return (
        job.kind,
        job.queue,
        job.args,
        str(job.state),  # a JobState (a str enum) from build_job
        job.priority,
        job.max_attempts,
        job.tags,
        job.metadata,
        job.ordering_key,
    )


async def job_notify_queues(conn: AsyncConnection[Any], schema: str, queues: list[str]) -> None:
    """NOTIFY each of ``queues`` on the schema's channel (at commit)."""
    await conn.execute(
        query("job_notify_queues", schema), {"channel": channel(schema), "queues": queues}
    )


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


@functools.lru_cache(maxsize=1024)
def _claim_query(schema: str, limit: int) -> LiteralString:
    """job_claim with its LIMIT written as a literal.

    With ``LIMIT %(limit)s`` a generic plan must guess how many rows the claim takes (a
    tenth of the table), costs far above a custom plan's, and PostgreSQL then plans the
    prepared claim again at every execution. With the number in the text, each limit a
    process uses is its own prepared statement whose generic plan is the custom one:
    planned once per connection.
    """
    text = query("job_claim", schema)
    return text.replace("%(limit)s", str(int(limit)))  # type: ignore[return-value]


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
    return await _positional(
        conn,
        _claim_query(schema, limit),
        {
            "queue": queue,
            "deadline_kinds": list(deadlines),
            "deadline_seconds": list(deadlines.values()),
            "default_deadline": default_deadline,
        },
    )


def _finalize_params(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    return {
        "id": [o.job_id for o in outcomes],
        "run_lease": [o.run_lease for o in outcomes],
        "state": [o.state.value for o in outcomes],
        "delay": _unless_all([o.delay for o in outcomes], None),
        "error": _unless_all([o.error for o in outcomes], None),
        "terminal": _unless_all([o.terminal for o in outcomes], False),
        "attempt_delta": _unless_all([o.attempt_delta for o in outcomes], 0),
        "progress": _unless_all([o.progress for o in outcomes], None),
        "callback_id": _unless_all([o.callback_id for o in outcomes], None),
        "at": _unless_all([o.at for o in outcomes], None),
        "run_at": _unless_all([o.run_at for o in outcomes], None),
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


async def _operated(
    conn: AsyncConnection[Any], name: str, schema: str, job_id: int
) -> tuple[JobState, JobRow | None] | None:
    # None: no such job. (state, None): the state did not allow the action.
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            query(name, schema),
            {"id": job_id, "channel": channel(schema), "cancel_channel": cancel_channel(schema)},
        )
        rec = await cur.fetchone()
    if rec is None:
        return None
    found = JobState(rec["prev_state"])
    return found, JobRow.from_record(rec) if rec["id"] is not None else None


async def job_cancel(
    conn: AsyncConnection[Any], schema: str, job_id: int
) -> tuple[JobState, JobRow | None] | None:
    """Cancel a non-terminal job, notifying its worker; see :func:`job_retry` for results."""
    return await _operated(conn, "job_cancel", schema, job_id)


async def job_retry(
    conn: AsyncConnection[Any], schema: str, job_id: int
) -> tuple[JobState, JobRow | None] | None:
    """Make a failed/cancelled/waiting_external job available now.

    None when no job has ``job_id``; else the state the job was found in and its
    new row, or None for the row when that state did not allow the action.
    """
    return await _operated(conn, "job_retry", schema, job_id)


async def queue_pause(conn: AsyncConnection[Any], schema: str, name: str) -> None:
    """Mark queue ``name`` paused (creating its row if needed)."""
    await conn.execute(query("queue_pause", schema), {"name": name})


async def queue_resume(conn: AsyncConnection[Any], schema: str, name: str) -> None:
    """Mark queue ``name`` not paused and wake its workers."""
    await conn.execute(query("queue_resume", schema), {"name": name, "channel": channel(schema)})


async def queue_drain(conn: AsyncConnection[Any], schema: str, queue: str) -> int:
    """Cancel the jobs of ``queue`` waiting to run; returns how many."""
    cur = await conn.execute(
        query("queue_drain", schema), {"queue": queue, "cancel_channel": cancel_channel(schema)}
    )
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def queue_stats(conn: AsyncConnection[Any], schema: str) -> list[QueueStats]:
    """Counts by state, pause flag and lag of every known queue, by name."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("queue_stats", schema))
        return [QueueStats.from_record(r) for r in await cur.fetchall()]


# -- maintenance: runtime records, retention cleanup, priority aging -------------------


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


async def runtime_instance_delete_stale(
    conn: AsyncConnection[Any], schema: str, *, default_interval: float, min_age: float
) -> list[str]:
    """Remove the records of processes presumed dead; returns their instance ids."""
    cur = await conn.execute(
        query("runtime_instance_delete_stale", schema),
        {"default_interval": default_interval, "min_age": min_age},
    )
    return [r[0] for r in await cur.fetchall()]


async def runtime_instance_list(conn: AsyncConnection[Any], schema: str) -> list[RuntimeInstance]:
    """Every recorded process, oldest first."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("runtime_instance_list", schema))
        return [RuntimeInstance.from_record(r) for r in await cur.fetchall()]


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
        },
    )


async def jobs_table_stats(conn: AsyncConnection[Any], schema: str) -> tuple[float, int]:
    """(reltuples, rows changed since the last analyze) of the jobs table."""
    cur = await conn.execute(
        query("jobs_table_stats", schema), {"table": f'"{validate_schema(schema)}".jobs'}
    )
    row = await cur.fetchone()
    return (float(row[0]), int(row[1])) if row else (-1.0, 0)


async def jobs_table_analyze(conn: AsyncConnection[Any], schema: str) -> None:
    """ANALYZE the jobs table."""
    await conn.execute(query("jobs_table_analyze", schema))


async def job_delete_finalized(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    completed: float,
    failed: float,
    cancelled: float,
    limit: int,
) -> dict[str, int]:
    """Delete up to ``limit`` terminal jobs past their retention; returns counts per state."""
    cur = await conn.execute(
        query("job_delete_finalized", schema),
        {"completed": completed, "failed": failed, "cancelled": cancelled, "limit": limit},
    )
    return {r[0]: r[1] for r in await cur.fetchall()}


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
