"""Insert jobs on your own psycopg connection, inside your own transaction."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection, Connection

from wai import _inserts_db, _inserts_db_async
from wai._inserts import EnqueueRequest, NewJob, build_job
from wai._job import JobRow
from wai._registry import known_queue
from wai._sql import validate_schema
from wai._unique import UniqueOpts

__all__ = ["insert_job", "insert_job_sync"]


def build_bridge_job(
    args: Any,
    *,
    kind: str | None,
    queue: str | None,
    priority: int | None,
    max_attempts: int | None,
    run_at: datetime | None,
    tags: Iterable[str],
    metadata: Mapping[str, Any] | None,
    unique: UniqueOpts | None,
    ordering_key: str | None,
) -> NewJob:
    """The validated row of a bridge's insert: the options of ``insert``, defaults from
    the args type or the process's registered tasks (every bridge builds its job here)."""
    return build_job(
        EnqueueRequest(
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
        ),
        default_queue=known_queue,
    )


async def insert_job(
    conn: AsyncConnection[Any],
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
    """Insert a job on a psycopg ``AsyncConnection``, in its current transaction.

    Nothing is committed here: the job becomes visible (and its queue is
    notified) when the caller commits, and vanishes if the caller rolls back.
    ``queue``, ``priority`` and ``max_attempts`` default to what the args type
    declares (``@wai.kind``, or a ``@client.task`` of the type in this process);
    dict args with ``kind=`` go to the queue a task of that kind was registered
    on by any client in this process, else ``"default"``.
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
    return await _inserts_db_async.insert_one(conn, validate_schema(schema), job)


def insert_job_sync(
    conn: Connection[Any],
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
    """Insert a job on a psycopg sync ``Connection``; see :func:`insert_job`."""
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
    return _inserts_db.insert_one(conn, validate_schema(schema), job)
