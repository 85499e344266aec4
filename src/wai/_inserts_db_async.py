"""Job inserts on the caller's connection (unique-key conflicts, batches, COPY, follow-ups).

Shared by the clients, their transactions, the bridge, transitions and the outbox sweeper.
While tracing (:mod:`wai._tracing`), each insert call is one PRODUCER span whose context
the jobs store; follow-ups come with the context of their trigger's outcome already.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import AsyncConnection

from wai import _db_async as db
from wai._inserts import NewJob, inserted_row
from wai._job import JobRow, JobState
from wai._metrics import METRICS
from wai._tracing import otel
from wai._translate import translate_errors
from wai.errors import UniqueConflict, ValidationError

__all__ = ["copy_batch", "insert_batch", "insert_each", "insert_followups", "insert_one"]


def _conflict(job: NewJob, existing: JobRow | None) -> UniqueConflict:
    where = f" (job {existing.id}, {existing.state})" if existing else ""
    return UniqueConflict(
        f"a {job.kind!r} job with the same unique key already exists{where}; "
        "pass UniqueOpts(on_conflict='skip') to get the existing job instead",
        existing_id=existing.id if existing else None,
    )


async def insert_one(
    conn: AsyncConnection[Any], schema: str, job: NewJob, *, own: bool = False
) -> JobRow:
    """Insert ``job`` on ``conn`` (in the caller's transaction, if any).

    *own*: ``conn`` is an autocommit connection of the client's pool, outside any
    transaction, and the insert skips psycopg's cursor (:func:`wai._db_async.job_insert_own`).
    """
    if otel is not None and otel.active():
        with otel.sending("insert", [job]) as sending:
            if sending.trace is not None:
                (job,) = otel.with_trace([job], sending.trace)
            row = await _insert_one(conn, schema, job, own)
            sending.sent([row])
            return row
    return await _insert_one(conn, schema, job, own)


async def _insert_one(conn: AsyncConnection[Any], schema: str, job: NewJob, own: bool) -> JobRow:
    insert = db.job_insert_own if own else db.job_insert
    with translate_errors(schema):
        # Bounded: a key that changes hands this often is reported as held (below).
        for _ in range(3):
            row = await insert(conn, schema, job)
            if row is not None:
                METRICS.inserted.add((job.queue, job.kind))
                return row
            assert job.unique_key is not None
            existing = await db.job_get_by_unique_key(conn, schema, job.unique_key)
            if job.on_conflict == "raise":
                raise _conflict(job, existing)
            if existing is not None:
                return existing
            # The holder left its unique states between the two statements: insert again.
    raise _conflict(job, None)


async def insert_each(
    conn: AsyncConnection[Any], schema: str, jobs: Sequence[NewJob]
) -> list[JobRow | Exception]:
    """Insert the jobs of independent callers in one statement and one commit (group commit).

    ``conn`` is an autocommit connection of the client's pool. Per job, in order: its row,
    or the error that inserting it alone raises, which fails that job's caller only. A job whose
    unique key is held goes through the single insert afterwards (the conflict it raises,
    or the existing job it skips to); a statement the server refuses (one job's value)
    inserted nothing, and each job is then inserted on its own. Untraced: the callers
    hold their spans. A broken connection raises, for every job.
    """
    if len(jobs) == 1:
        return [await _alone(conn, schema, jobs[0])]
    try:
        with translate_errors(schema):
            inserted = await db.job_insert_many_ids(conn, schema, jobs)
    except psycopg.OperationalError:
        raise
    except Exception:  # one caller's job refused: each on its own says whose
        return [await _alone(conn, schema, job) for job in jobs]
    out: list[JobRow | Exception] = []
    count = METRICS.inserted.add
    for job, row in zip(jobs, inserted, strict=True):
        if row is None:
            out.append(await _alone(conn, schema, job))
        else:
            count((job.queue, job.kind))
            out.append(inserted_row(job, row[0], row[1], row[2]))
    return out


async def _alone(conn: AsyncConnection[Any], schema: str, job: NewJob) -> JobRow | Exception:
    """:func:`insert_one` of a grouped job, untraced; its error returned, for its caller
    alone (a broken connection too: the jobs inserted before it stay inserted)."""
    try:
        return await _insert_one(conn, schema, job, True)
    except Exception as exc:
        return exc


async def insert_batch(
    conn: AsyncConnection[Any], schema: str, jobs: Sequence[NewJob]
) -> list[JobRow]:
    """Insert ``jobs`` in one statement; results follow the input order."""
    if not jobs:
        return []
    if otel is not None and otel.active():
        with otel.sending("insert_many", jobs) as sending:
            if sending.trace is not None:
                jobs = otel.with_trace(jobs, sending.trace)
            rows = await _insert_batch(conn, schema, jobs)
            sending.sent(rows)
            return rows
    return await _insert_batch(conn, schema, jobs)


async def _insert_batch(
    conn: AsyncConnection[Any], schema: str, jobs: Sequence[NewJob]
) -> list[JobRow]:
    with translate_errors(schema):
        inserted = await db.job_insert_many(conn, schema, jobs)
        out: list[JobRow] = []
        count = METRICS.inserted.add
        for job, row in zip(jobs, inserted, strict=True):
            if row is not None:
                count((job.queue, job.kind))
                out.append(row)
                continue
            assert job.unique_key is not None
            existing = await db.job_get_by_unique_key(conn, schema, job.unique_key)
            if job.on_conflict == "raise" or existing is None:
                raise _conflict(job, existing)
            out.append(existing)
        return out


async def insert_followups(conn: AsyncConnection[Any], schema: str, jobs: Sequence[NewJob]) -> None:
    """:func:`insert_batch` for follow-ups, whose inserted rows nobody reads.

    Raises :class:`wai.UniqueConflict` as ``insert_batch`` does; a unique job whose key is
    held with ``on_conflict="skip"`` inserts nothing.
    """
    if not jobs:
        return
    with translate_errors(schema):
        inserted = await db.job_insert_many_ids(conn, schema, jobs)
        for job, row in zip(jobs, inserted, strict=True):
            if row is None and job.on_conflict == "raise":
                assert job.unique_key is not None
                raise _conflict(job, await db.job_get_by_unique_key(conn, schema, job.unique_key))
        count = METRICS.followups.add
        for job, row in zip(jobs, inserted, strict=True):
            if row is not None:
                count((job.queue, job.kind, job.trigger[2] if job.trigger else "none"))


async def copy_batch(conn: AsyncConnection[Any], schema: str, jobs: Sequence[NewJob]) -> int:
    """COPY ``jobs`` and wake their queues on ``conn``; call it inside a transaction.

    Raises :class:`wai.ValidationError` before writing anything when a job has a unique
    key (COPY cannot skip or report a held key: use ``insert_many``).
    """
    for job in jobs:
        if job.unique_key is not None:
            raise ValidationError(
                f"copy_many cannot take unique jobs ({job.kind!r} has unique=...): "
                "COPY has no ON CONFLICT; insert them with insert_many"
            )
    if not jobs:
        return 0
    if otel is not None and otel.active():
        with otel.sending("copy_many", jobs) as sending:
            if sending.trace is not None:
                jobs = otel.with_trace(jobs, sending.trace)
            return await _copy_batch(conn, schema, jobs)
    return await _copy_batch(conn, schema, jobs)


async def _copy_batch(conn: AsyncConnection[Any], schema: str, jobs: Sequence[NewJob]) -> int:
    with translate_errors(schema):
        written = await db.job_copy(conn, schema, jobs)
        count = METRICS.inserted.add
        for job in jobs:
            count((job.queue, job.kind))
        waking = sorted({job.queue for job in jobs if job.state == JobState.AVAILABLE})
        if waking:
            await db.job_notify_queues(conn, schema, waking)
    return written
