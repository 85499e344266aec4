"""The database seam of jobs and queues that both clients use: one function per named query.

The shared queries of ``jobs.sql``, ``admin.sql`` and ``maintenance.sql`` (the source of the
generated sync :mod:`wai._db`). Queries only the async runtime runs live next to their users,
async only: :mod:`wai.worker._queries` (claim, heartbeats, runtime records) and
:mod:`wai.maintenance._queries` (leadership, promotion, rescue, cleanup, aging). Each feature
package (:mod:`wai.dlq`, :mod:`wai.cron`, :mod:`wai.outbox`, :mod:`wai.callbacks`) has its own.
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, cast

from psycopg import AsyncConnection, sql
from psycopg.rows import dict_row, tuple_row

from wai._admin import (
    EXACT_COUNT_LIMIT,
    TIME_BOUND_SLACK,
    JobSearch,
    QueueDepth,
    QueueStats,
    ThroughputMinute,
    counts_finished_exactly,
)
from wai._admin import queue_stats as admin_stats
from wai._direct_async import Statement, run_returning, statement
from wai._flow import RateLimit
from wai._inserts import NewJob, inserted_row
from wai._instances import RuntimeInstance
from wai._job import JobRow, JobState
from wai._migrate import Migration, ledger_sql, lock_key, pending
from wai._sql import query, validate_schema
from wai.outbox._models import OutboxEntry

__all__ = [
    "cancel_channel",
    "channel",
    "due_channel",
    "flow_channel",
    "job_cancel",
    "job_complete_by_caller",
    "job_copy",
    "job_get",
    "job_get_attempt",
    "job_get_by_unique_key",
    "job_insert",
    "job_insert_many",
    "job_insert_many_ids",
    "job_insert_own",
    "job_lineage",
    "job_list",
    "job_list_params",
    "job_notify_queues",
    "job_params",
    "job_retry",
    "kind_limit_set",
    "migrate_applied",
    "migrate_apply",
    "outbox_channel",
    "probe_channel",
    "queue_depth_history",
    "queue_drain",
    "queue_flow_figures",
    "queue_live_counts",
    "queue_pause",
    "queue_resume",
    "queue_set_limits",
    "queue_stats",
    "runtime_instance_list",
    "throughput_history",
    "unless_all",
]


def channel(schema: str) -> str:
    """The NOTIFY channel that wakes the workers of ``schema``."""
    return f"{validate_schema(schema)}.jobs"


def flow_channel(schema: str) -> str:
    """The NOTIFY channel that tells workers of ``schema`` a queue's limits changed."""
    return f"{validate_schema(schema)}.flow"


def due_channel(schema: str) -> str:
    """The NOTIFY channel that wakes promotion and cron in ``schema``: a job became
    scheduled or retryable, or a periodic schedule changed (triggers; empty payload)."""
    return f"{validate_schema(schema)}.due"


def outbox_channel(schema: str) -> str:
    """The NOTIFY channel that wakes the outbox sweepers of ``schema``: an outbox row was
    written, or made due sooner (triggers, migration 0015; empty payload)."""
    return f"{validate_schema(schema)}.outbox"


def probe_channel(schema: str) -> str:
    """The NOTIFY channel on which a worker of ``schema`` checks that its LISTEN
    connection receives notifications (its own random payload)."""
    return f"{validate_schema(schema)}.probe"


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


def job_params(job: NewJob) -> dict[str, Any]:
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

# Compact, non-ASCII kept as is: the fewest bytes to send and for the server to parse.
_encode_column = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def unless_all(values: Sequence[Any], default: object) -> Sequence[Any] | None:
    """``values``, or None (a NULL array or document) when each one is ``default``."""
    return None if values.count(default) == len(values) else values


def _column(values: Sequence[Any], default: object = None) -> str | None:
    """``values`` as one JSON array; None (SQL NULL) when each value is ``default``.

    ROWS FROM pads the empty result of ``jsonb_array_elements(NULL)`` with NULLs, so a
    column that no job of the batch sets costs neither its encoding nor its parse.
    """
    kept = unless_all(values, default)
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
    # to_regclass is NULL for a missing table, where a SELECT from it would raise.
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
        # Processes migrating at once take turns; the lock ends with this transaction.
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
    params = job_params(job)
    params["channel"] = channel(schema)
    name = "job_insert" if job.unique_key is None else "job_insert_unique"
    rows = await _inserted(conn, name, schema, params)
    if not rows:
        return None
    id_, run_at, created_at, *_ = rows[0]
    return inserted_row(job, id_, run_at, created_at)


def _text(value: object) -> bytes | None:
    """One parameter in PostgreSQL's text format, for a statement the server types."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int):  # priorities, attempts, trigger ids (never a bool: checked)
        return str(value).encode()
    if isinstance(value, bytes):
        return b"\\x" + value.hex().encode()
    if isinstance(value, datetime):  # aware (checked); in UTC, the offset is always +00:00
        return value.astimezone(UTC).isoformat().encode()
    if isinstance(value, list):  # tags and unique states: a text[] literal, each quoted
        items = cast(list[str], value)
        quoted = (s.replace("\\", "\\\\").replace('"', '\\"') for s in items)
        return ("{" + ",".join(f'"{s}"' for s in quoted) + "}").encode()
    raise TypeError(f"no text format for {type(value).__name__}")


#: The parameters of job_insert and job_insert_unique in the order of their text, as
#: :func:`_insert_values` sends them.
_INSERT_PARAMS = (
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
    "channel",
)


@functools.cache
def _insert_statement(unique: bool, schema: str) -> tuple[Statement, bytes]:
    """job_insert (or job_insert_unique) of ``schema`` for :func:`run_returning`, and the
    schema's channel as a text parameter."""
    stmt = statement("job_insert_unique" if unique else "job_insert", schema)
    if stmt[2] != _INSERT_PARAMS:
        raise RuntimeError(f"job_insert takes {stmt[2]}, not the {_INSERT_PARAMS} sent")
    return stmt, channel(schema).encode()


def _insert_values(job: NewJob, channel_text: bytes) -> list[bytes | None]:
    """The text parameters of job_insert for ``job``, in :data:`_INSERT_PARAMS` order."""
    trig = job.trigger
    run_at = job.run_at
    tags = job.tags
    key = job.unique_key
    states = job.unique_states
    ordering_key = job.ordering_key
    return [
        job.kind.encode(),
        job.queue.encode(),
        job.args.encode(),
        job.state.encode(),
        str(job.priority).encode(),
        str(job.max_attempts).encode(),
        None if run_at is None else _text(run_at),
        _text(tags) if tags else None,
        job.metadata.encode(),
        None if key is None else _text(key),
        None if states is None else _text(states),
        None if ordering_key is None else ordering_key.encode(),
        None if trig is None else str(trig[0]).encode(),
        None if trig is None else str(trig[1]).encode(),
        None if trig is None else trig[2].encode(),
        None if trig is None else trig[3].encode(),
        channel_text,
    ]


async def job_insert_own(conn: AsyncConnection[Any], schema: str, job: NewJob) -> JobRow | None:
    """:func:`job_insert` on a connection of the client's own pool, without a cursor.

    Autocommit and outside any transaction: see :mod:`wai._direct_async`.
    """
    stmt, channel_text = _insert_statement(job.unique_key is not None, schema)
    rows = await run_returning(conn, stmt, _insert_values(job, channel_text))
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


async def job_complete_by_caller(
    conn: AsyncConnection[Any], schema: str, job_id: int, run_lease: int
) -> JobRow | None:
    """Complete attempt ``(job_id, run_lease)`` on ``conn``, in its transaction; None when
    the attempt is stale."""
    rows = await _rows(
        conn, "job_complete_by_caller", schema, {"id": job_id, "run_lease": run_lease}
    )
    return rows[0] if rows else None


async def job_get_attempt(
    conn: AsyncConnection[Any], schema: str, job_id: int, run_lease: int
) -> JobRow | None:
    """Job ``job_id`` if its run lease is still ``run_lease``."""
    rows = await _rows(conn, "job_get_attempt", schema, {"id": job_id, "run_lease": run_lease})
    return rows[0] if rows else None


async def job_lineage(
    conn: AsyncConnection[Any], schema: str, job_id: int, *, up: int, down: int
) -> tuple[list[JobRow], list[JobRow], list[OutboxEntry]]:
    """Job ``job_id``'s trigger chain (at most ``up``), its follow-ups (at most ``down``)
    and the outbox rows of it and its follow-ups."""
    ancestors = await _rows(conn, "job_lineage_up", schema, {"id": job_id, "limit": up})
    followups = await _rows(conn, "job_lineage_down", schema, {"id": job_id, "limit": down})
    ids = [job_id, *(r.id for r in followups)]
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("outbox_of_jobs", schema), {"ids": ids})
        owed = [OutboxEntry.from_record(r) for r in await cur.fetchall()]
    return ancestors, followups, owed


def job_list_params(
    *,
    state: str | None = None,
    kind: str | None = None,
    queue: str | None = None,
    tag: str | None = None,
    trigger_job_id: int | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    search: JobSearch | None = None,
    before_id: int | None = None,
    after_id: int | None = None,
    limit: int = 100,
) -> dict[str, Any]:
    """The parameters of the ``job_list`` query for these (checked) filters."""
    return {
        "state": state,
        "kind": kind,
        "queue": queue,
        "tag": tag,
        "trigger_job_id": trigger_job_id,
        "created_after": created_after,
        "created_before": created_before,
        "slack": TIME_BOUND_SLACK,
        "search_id": search.job_id if search is not None else None,
        "search_like": search.pattern if search is not None else None,
        "before_id": before_id,
        "after_id": after_id,
        "limit": limit,
    }


async def job_list(
    conn: AsyncConnection[Any],
    schema: str,
    *,
    state: str | None,
    kind: str | None,
    queue: str | None,
    tag: str | None,
    trigger_job_id: int | None,
    created_after: datetime | None,
    created_before: datetime | None,
    search: JobSearch | None,
    before_id: int | None,
    after_id: int | None,
    limit: int,
) -> list[JobRow]:
    """Jobs newest first, filtered (see the ``job_list`` query for how time bounds are read)."""
    params = job_list_params(
        state=state,
        kind=kind,
        queue=queue,
        tag=tag,
        trigger_job_id=trigger_job_id,
        created_after=created_after,
        created_before=created_before,
        search=search,
        before_id=before_id,
        after_id=after_id,
        limit=limit,
    )
    # planned for these values each time: a prepared generic plan would keep every filter
    return await _rows(conn, "job_list", schema, params, prepare=False)


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


async def queue_set_limits(
    conn: AsyncConnection[Any],
    schema: str,
    name: str,
    *,
    rate_limit: RateLimit | None,
    global_concurrency: int | None,
) -> None:
    """Replace the flow control of queue ``name`` (None lifts a limit)."""
    await conn.execute(
        query("queue_set_limits", schema),
        {
            "name": name,
            "rate_limit": rate_limit.limit if rate_limit else None,
            "rate_per": rate_limit.per if rate_limit else None,
            "rate_burst": rate_limit.capacity if rate_limit else None,
            "global_concurrency": global_concurrency,
            "flow_channel": flow_channel(schema),
            "channel": channel(schema),
        },
    )


async def kind_limit_set(
    conn: AsyncConnection[Any],
    schema: str,
    queue: str,
    kind: str,
    rate_limit: RateLimit | None,
) -> None:
    """Set (None: lift) the rate limit of ``kind`` within ``queue``, in one transaction
    with the queue's flag of kind limits."""
    async with conn.transaction():
        await conn.execute(
            query("kind_limit_set", schema),
            {
                "queue": queue,
                "kind": kind,
                "rate_limit": rate_limit.limit if rate_limit else None,
                "rate_per": rate_limit.per if rate_limit else None,
                "rate_burst": rate_limit.capacity if rate_limit else None,
                "flow_channel": flow_channel(schema),
                "channel": channel(schema),
            },
        )
        await conn.execute(query("queue_kind_limits_flag", schema), {"queue": queue})


async def queue_resume(conn: AsyncConnection[Any], schema: str, name: str) -> None:
    """Mark queue ``name`` not paused and wake its workers."""
    await conn.execute(query("queue_resume", schema), {"name": name, "channel": channel(schema)})


async def queue_drain(conn: AsyncConnection[Any], schema: str, queue: str) -> list[int]:
    """Cancel the jobs of ``queue`` waiting to run; returns their ids."""
    cur = await conn.execute(
        query("queue_drain", schema), {"queue": queue, "cancel_channel": cancel_channel(schema)}
    )
    return [r[0] for r in await cur.fetchall()]


async def queue_live_counts(conn: AsyncConnection[Any], schema: str) -> list[dict[str, Any]]:
    """Per known queue: exact counts of its unfinished jobs by state, pause flag and lag.

    Records with ``name``, ``counts`` (only the states that have jobs), ``paused``,
    ``paused_at`` and ``oldest_available_lag``; reads live rows only.
    """
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("queue_live_counts", schema))
        return await cur.fetchall()


async def queue_flow_figures(conn: AsyncConnection[Any], schema: str) -> list[dict[str, Any]]:
    """Per queue with a limit (its own or one of its kinds') or ordering keys at work: its
    flow control gauges.

    Records with ``name``, ``rate_tokens`` (None without a rate limit),
    ``global_concurrency`` (None without one), ``keys_running``, ``waiting_turn`` and
    ``kind_tokens`` (``{kind: tokens}`` of its rate-limited kinds), by name; reads no job
    without an ordering key.
    """
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("queue_flow_figures", schema))
        return await cur.fetchall()


async def queue_depth_history(
    conn: AsyncConnection[Any], schema: str, *, minutes: int, queue: str | None
) -> list[QueueDepth]:
    """The depth samples of the last ``minutes``, oldest first."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            query("queue_depth_history", schema), {"minutes": minutes, "queue": queue}
        )
        return [QueueDepth.from_record(r) for r in await cur.fetchall()]


async def throughput_history(
    conn: AsyncConnection[Any], schema: str, *, minutes: int, queue: str | None, kind: str | None
) -> list[ThroughputMinute]:
    """Counts by event for every minute of the last ``minutes``, oldest first."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            query("throughput_history", schema), {"minutes": minutes, "queue": queue, "kind": kind}
        )
        return [ThroughputMinute.from_record(r) for r in await cur.fetchall()]


async def queue_stats(conn: AsyncConnection[Any], schema: str) -> list[QueueStats]:
    """Counts by state, pause flag and lag of every known queue, by name.

    Live counts are exact; finished ones too on a small table, else estimated from the
    table's statistics (see :func:`wai._admin.counts_finished_exactly`).
    """
    live = await queue_live_counts(conn, schema)
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("jobs_size_estimate", schema), {"schema": schema})
        size = await cur.fetchone()
        rows: float | None = size["rows"] if size is not None else None
        finished: list[dict[str, Any]] = []
        if rows is not None and rows > EXACT_COUNT_LIMIT:
            await cur.execute(
                query("queue_finished_estimates", schema), {"schema": schema, "rows": rows}
            )
            finished = await cur.fetchall()
        exact = counts_finished_exactly(rows, bool(finished))
        if exact:
            await cur.execute(query("queue_finished_counts", schema))
            finished = await cur.fetchall()
        return admin_stats(live, finished, estimated=not exact)


async def runtime_instance_list(conn: AsyncConnection[Any], schema: str) -> list[RuntimeInstance]:
    """Every recorded process, oldest first."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query("runtime_instance_list", schema))
        return [RuntimeInstance.from_record(r) for r in await cur.fetchall()]
