"""Insert jobs on a SQLAlchemy 2 session or connection, inside its transaction.

``await insert_job(session, args, ...)`` takes an ``AsyncSession`` or ``AsyncConnection``
on the ``postgresql+psycopg`` or ``postgresql+asyncpg`` dialect; ``insert_job_sync``
takes a ``Session`` or ``Connection`` on ``postgresql+psycopg``. The job is inserted on
the driver connection that holds the session's transaction (through :mod:`wai.bridge`
or :mod:`wai.bridges.asyncpg`): it commits with ``session.commit()``, vanishes with a
rollback, and its queue's workers are woken only at commit.

A session or connection that has not begun a transaction yet begins one, as its next
statement would (SQLAlchemy's autobegin); an ``AUTOCOMMIT`` connection commits the
insert at once. Other drivers (psycopg2, pg8000, ...) are refused with
:class:`wai.ValidationError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection, Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.orm import Session

from wai import bridge
from wai._job import JobRow
from wai._unique import UniqueOpts
from wai.errors import ValidationError

__all__ = ["insert_job", "insert_job_sync"]

Driver = Literal["psycopg", "asyncpg"]


def _driver(dialect: Dialect, *, is_async: bool) -> Driver:
    """The wai bridge that serves ``dialect``, or a ValidationError naming it."""
    name = f"{dialect.name}+{dialect.driver}"
    if dialect.is_async and not is_async:
        raise ValidationError(
            f"{name} is an asyncio dialect: use `await wai.bridges.sqlalchemy.insert_job(...)` "
            "on its AsyncSession or AsyncConnection"
        )
    drivers = ("psycopg", "asyncpg") if is_async else ("psycopg",)
    if dialect.name == "postgresql" and dialect.driver in drivers:
        return "asyncpg" if dialect.driver == "asyncpg" else "psycopg"
    wanted = " or ".join(f"postgresql+{d}" for d in drivers)
    call = "insert_job" if is_async else "insert_job_sync"
    raise ValidationError(
        f"wai.bridges.sqlalchemy.{call} needs an engine on the {wanted} dialect, "
        f"not {name}: create the engine with a URL such as "
        f"'postgresql+{drivers[-1]}://...'"
    )


async def insert_job(
    session_or_conn: AsyncSession | AsyncConnection,
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
    """Insert a job in the transaction of an ``AsyncSession`` or ``AsyncConnection``.

    Nothing is committed here: the job becomes visible (and its queue is notified) when
    the caller commits, and vanishes if the caller rolls back. The options are those of
    :func:`wai.bridge.insert_job`.
    """
    # the same options for whichever bridge the dialect leads to
    options: dict[str, Any] = {
        "kind": kind,
        "queue": queue,
        "priority": priority,
        "max_attempts": max_attempts,
        "run_at": run_at,
        "tags": tags,
        "metadata": metadata,
        "unique": unique,
        "ordering_key": ordering_key,
        "schema": schema,
    }
    conn = session_or_conn
    if isinstance(conn, AsyncSession):
        conn = await conn.connection()
    driver = _driver(conn.dialect, is_async=True)
    if not conn.in_transaction():
        await conn.begin()
    raw = await conn.get_raw_connection()
    native: Any = raw.driver_connection
    if driver == "psycopg":
        return await bridge.insert_job(
            native,
            args,
            **options,
        )
    from wai.bridges import asyncpg  # only this dialect needs asyncpg installed

    adapted: Any = raw.dbapi_connection
    if not native.is_in_transaction() and not adapted.autocommit:
        # SQLAlchemy's asyncpg adapter sends BEGIN with the first statement of the
        # transaction, not at begin(): a statement through it opens the transaction
        # the insert must join (one statement more, only when the insert comes first).
        await conn.exec_driver_sql("SELECT 1")
    return await asyncpg.insert_job(
        native,
        args,
        **options,
    )


def insert_job_sync(
    session_or_conn: Session | Connection,
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
    """Insert a job in the transaction of a ``Session`` or ``Connection``
    (``postgresql+psycopg``); see :func:`insert_job`."""
    # The dialect is checked first: connecting an asyncio engine here could not work.
    if isinstance(session_or_conn, Session):
        _driver(session_or_conn.get_bind().dialect, is_async=False)
        conn = session_or_conn.connection()
    else:
        conn = session_or_conn
        _driver(conn.dialect, is_async=False)
    if not conn.in_transaction():
        conn.begin()
    native: Any = conn.connection.driver_connection
    return bridge.insert_job_sync(
        native,
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
        schema=schema,
    )
