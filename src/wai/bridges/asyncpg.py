"""Insert jobs on your own asyncpg connection, inside your own transaction.

``await insert_job(conn, args, ...)`` takes an ``asyncpg.Connection`` or a connection
acquired from an ``asyncpg.Pool``. Inside ``async with conn.transaction():`` the job
commits or rolls back with the block, and its queue's workers are woken (NOTIFY) only at
commit. Outside a transaction the insert is one statement of its own, committed at once.

The statement is wai's own ``job_insert`` (the one ``client.insert`` runs), with its
``%(name)s`` parameters numbered for asyncpg (:func:`wai._sql.dollar_query`). The first
insert on a connection costs asyncpg one more round trip to learn wai's ``job_state``
type; later ones reuse the connection's prepared statement.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Protocol, TypeAlias, cast

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from wai._db_async import channel, job_params
from wai._inserts import NewJob, inserted_row
from wai._job import JobRow
from wai._json import loads
from wai._metrics import METRICS
from wai._sql import dollar_query, validate_schema
from wai._tracing import otel
from wai._translate import from_sqlstate
from wai._unique import UniqueOpts
from wai.bridge import build_bridge_job
from wai.errors import UniqueConflict

__all__ = ["Connection", "insert_job"]

#: What :func:`insert_job` takes: a connection, or one acquired from a pool.
Connection: TypeAlias = "asyncpg.Connection | PoolConnectionProxy"


class _Statements(Protocol):
    """The two calls of a connection this module makes (asyncpg ships no type hints).

    A pool's connection proxy forwards them to its connection.
    """

    async def fetchrow(self, query: str, *args: Any) -> Any: ...

    async def prepare(self, query: str) -> Any: ...


# Classes of SQLSTATE that say the connection or the server failed, not the request:
# they pass through untouched, as psycopg's OperationalError does on the psycopg path.
_OPERATIONAL = ("08", "53", "57", "58")


async def insert_job(
    conn: Connection,
    args: Any,
    *,
    kind: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    run_at: datetime | None = None,
    tags: Iterable[str] = (),
    metadata: Mapping[str, Any] | None = None,
    unique: UniqueOpts | None = None,
    ordering_key: str | None = None,
    schema: str = "wai",
) -> JobRow:
    """Insert a job on an asyncpg connection, in its current transaction.

    Nothing is committed here: inside ``conn.transaction()`` the job becomes visible
    (and its queue is notified) when the block commits, and vanishes if it rolls back.
    Outside a transaction the insert commits at once. The options are those of
    :func:`wai.bridge.insert_job`: ``queue``, ``priority`` and ``max_attempts`` default
    to what the args type declares; a held unique key raises :class:`wai.UniqueConflict`,
    or returns the job that holds it with ``UniqueOpts(on_conflict="skip")``.
    """
    job = build_bridge_job(
        args,
        kind=kind,
        queue=queue,
        priority=priority,
        max_attempts=max_attempts,
        run_at=run_at,
        tags=tags,
        metadata=metadata,
        unique=unique,
        ordering_key=ordering_key,
    )
    schema = validate_schema(schema)
    if otel is not None and otel.active():
        with otel.sending("insert", [job]) as sending:
            if sending.trace is not None:
                (job,) = otel.with_trace([job], sending.trace)
            row = await _insert_one(conn, schema, job)
            sending.sent([row])
            return row
    return await _insert_one(conn, schema, job)


async def _insert_one(conn: Connection, schema: str, job: NewJob) -> JobRow:
    """wai._inserts_db_async._insert_one on asyncpg; keep the two in step."""
    with _translate_errors(schema):
        # Bounded: a key that changes hands this often is reported as held (below).
        for _ in range(3):
            row = await _job_insert(conn, schema, job)
            if row is not None:
                METRICS.inserted.add((job.queue, job.kind))
                return row
            assert job.unique_key is not None
            existing = await _job_get_by_unique_key(conn, schema, job.unique_key)
            if job.on_conflict == "raise":
                raise _conflict(job, existing)
            if existing is not None:
                return existing
            # The holder left its unique states between the two statements: insert again.
    raise _conflict(job, None)


def _conflict(job: NewJob, existing: JobRow | None) -> UniqueConflict:
    where = f" (job {existing.id}, {existing.state})" if existing else ""
    return UniqueConflict(
        f"a {job.kind!r} job with the same unique key already exists{where}; "
        "pass UniqueOpts(on_conflict='skip') to get the existing job instead",
        existing_id=existing.id if existing else None,
    )


def _bind(names: Sequence[str], params: Mapping[str, Any]) -> list[Any]:
    return [params[name] for name in names]


async def _job_insert(conn: Connection, schema: str, job: NewJob) -> JobRow | None:
    """wai._db_async.job_insert: one job; None when its unique key is already held."""
    params = job_params(job)
    params["channel"] = channel(schema)
    text, names = dollar_query(
        "job_insert" if job.unique_key is None else "job_insert_unique", schema
    )
    record = await cast(_Statements, conn).fetchrow(text, *_bind(names, params))
    if record is None:
        return None
    return inserted_row(job, record[0], record[1], record[2])


async def _job_get_by_unique_key(conn: Connection, schema: str, key: bytes) -> JobRow | None:
    """The job holding ``key``, decoded as psycopg would have returned it.

    asyncpg hands jsonb columns over as text, unless the connection has a codec of its
    own that decodes them (SQLAlchemy's asyncpg dialect sets one). ``metadata`` is
    always a JSON object: when it comes as text, the jsonb columns (found by the
    statement's column types) are parsed here, so that :meth:`JobRow.from_record` reads
    the same values on every connection.
    """
    text, names = dollar_query("job_get_by_unique_key", schema)
    statement = await cast(_Statements, conn).prepare(text)
    record = await statement.fetchrow(*_bind(names, {"unique_key": key}))
    if record is None:
        return None
    fields: dict[str, Any] = dict(record.items())
    if isinstance(fields["metadata"], str):
        for attribute in statement.get_attributes():
            name = attribute.name
            if attribute.type.name in ("json", "jsonb") and fields[name] is not None:
                fields[name] = loads(fields[name])
    return JobRow.from_record(fields)


@contextmanager
def _translate_errors(schema: str) -> Iterator[None]:
    """wai._translate.translate_errors for asyncpg's server errors."""
    try:
        yield
    except asyncpg.PostgresError as exc:
        error: Any = exc  # its fields are set per instance, from the server's message
        state = str(error.sqlstate)
        if state.startswith(_OPERATIONAL):
            raise
        raise from_sqlstate(
            schema,
            state,
            str(error.message),
            error.constraint_name,
            f"{type(exc).__name__}: {exc}",
        ) from exc
