"""wai.bridges: inserts in the caller's own asyncpg or SQLAlchemy transaction.

Every test runs on each way a caller holds a transaction (:data:`SHAPES`): a plain asyncpg
connection, one from an asyncpg pool, SQLAlchemy's sync Session and Connection (psycopg),
and its AsyncSession and AsyncConnection on the psycopg and the asyncpg dialects.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest
from sqlalchemy import Connection, Engine, create_engine, make_url, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.orm import Session

import wai
import wai.bridges.asyncpg
import wai.bridges.sqlalchemy
from tests.factories import SendEmail, count_jobs
from tests.integration._helpers import serving

_COUNT = "SELECT count(*) FROM wai.jobs"


@dataclass
class Caller:
    """One open transaction of the caller's, and the bridge call that inserts in it."""

    insert: Callable[..., Awaitable[wai.JobRow]]  # (args, **options)
    count: Callable[[], Awaitable[int]]  # jobs the transaction sees
    commit: Callable[[], Awaitable[None]]
    rollback: Callable[[], Awaitable[None]]


def _sa_url(database_url: str, driver: str) -> str:
    return make_url(database_url).set(drivername=f"postgresql+{driver}").render_as_string(False)


@asynccontextmanager
async def _asyncpg_conn(database_url: str) -> AsyncIterator[Caller]:
    conn = await asyncpg.connect(database_url)
    try:
        tx = conn.transaction()
        await tx.start()

        async def insert(args: Any, **options: Any) -> wai.JobRow:
            return await wai.bridges.asyncpg.insert_job(conn, args, **options)

        async def count() -> int:
            return int(await conn.fetchval(_COUNT))

        yield Caller(insert, count, tx.commit, tx.rollback)
    finally:
        await conn.close()


@asynccontextmanager
async def _asyncpg_pool(database_url: str) -> AsyncIterator[Caller]:
    async with (
        asyncpg.create_pool(database_url, min_size=1, max_size=1) as pool,
        pool.acquire() as conn,
    ):
        tx = conn.transaction()
        await tx.start()

        async def insert(args: Any, **options: Any) -> wai.JobRow:
            return await wai.bridges.asyncpg.insert_job(conn, args, **options)

        async def count() -> int:
            return int(await conn.fetchval(_COUNT))

        yield Caller(insert, count, tx.commit, tx.rollback)


def _sync_caller(target: Session | Connection) -> Caller:
    async def insert(args: Any, **options: Any) -> wai.JobRow:
        return wai.bridges.sqlalchemy.insert_job_sync(target, args, **options)

    async def count() -> int:
        return int(target.execute(text(_COUNT)).scalar_one())

    async def commit() -> None:
        target.commit()

    async def rollback() -> None:
        target.rollback()

    return Caller(insert, count, commit, rollback)


@asynccontextmanager
async def _sync_engine(database_url: str) -> AsyncIterator[Engine]:
    engine = create_engine(_sa_url(database_url, "psycopg"))
    try:
        yield engine
    finally:
        engine.dispose()


@asynccontextmanager
async def _sa_session(database_url: str) -> AsyncIterator[Caller]:
    async with _sync_engine(database_url) as engine:
        with Session(engine) as session:
            yield _sync_caller(session)


@asynccontextmanager
async def _sa_connection(database_url: str) -> AsyncIterator[Caller]:
    async with _sync_engine(database_url) as engine:
        with engine.connect() as conn:
            yield _sync_caller(conn)


def _async_caller(target: AsyncSession | AsyncConnection) -> Caller:
    async def insert(args: Any, **options: Any) -> wai.JobRow:
        return await wai.bridges.sqlalchemy.insert_job(target, args, **options)

    async def count() -> int:
        return int((await target.execute(text(_COUNT))).scalar_one())

    return Caller(insert, count, target.commit, target.rollback)


@asynccontextmanager
async def _async_engine(database_url: str, driver: str) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(_sa_url(database_url, driver))
    try:
        yield engine
    finally:
        await engine.dispose()


def _sa_async_session(driver: str) -> Callable[[str], Any]:
    @asynccontextmanager
    async def shape(database_url: str) -> AsyncIterator[Caller]:
        async with (
            _async_engine(database_url, driver) as engine,
            AsyncSession(engine) as session,
        ):
            yield _async_caller(session)

    return shape


def _sa_async_connection(driver: str) -> Callable[[str], Any]:
    @asynccontextmanager
    async def shape(database_url: str) -> AsyncIterator[Caller]:
        async with _async_engine(database_url, driver) as engine, engine.connect() as conn:
            yield _async_caller(conn)

    return shape


SHAPES = {
    "asyncpg-connection": _asyncpg_conn,
    "asyncpg-pool": _asyncpg_pool,
    "sqlalchemy-session": _sa_session,
    "sqlalchemy-connection": _sa_connection,
    "sqlalchemy-async-session-psycopg": _sa_async_session("psycopg"),
    "sqlalchemy-async-session-asyncpg": _sa_async_session("asyncpg"),
    "sqlalchemy-async-connection-psycopg": _sa_async_connection("psycopg"),
    "sqlalchemy-async-connection-asyncpg": _sa_async_connection("asyncpg"),
}


@pytest.fixture(params=list(SHAPES))
def shape(request: pytest.FixtureRequest) -> Callable[[str], Any]:
    """Opens a :class:`Caller` on a database URL (``async with shape(url) as caller``)."""
    return SHAPES[request.param]


async def test_rollback_leaves_no_job(shape: Callable[[str], Any], database_url: str) -> None:
    async with shape(database_url) as caller:
        row = await caller.insert(SendEmail(to="x"), queue="bridged")
        assert row.queue == "bridged"
        assert await caller.count() == 1  # visible inside the caller's transaction
        assert count_jobs(database_url) == 0  # and nowhere else before commit
        await caller.rollback()
        assert count_jobs(database_url) == 0


async def test_commit_stores_the_row_the_bridge_returned(
    shape: Callable[[str], Any], database_url: str, aclient: wai.AsyncClient
) -> None:
    async with shape(database_url) as caller:
        row = await caller.insert(
            SendEmail(to="x"),
            priority=3,
            tags=["bridge"],
            metadata={"via": "bridge"},
            ordering_key="k",
            unique=wai.UniqueOpts(),
        )
        assert count_jobs(database_url) == 0
        await caller.commit()
    assert count_jobs(database_url) == 1
    assert await aclient.get_job(row.id) == row
    assert (row.kind, row.args["to"]) == ("send_email", "x")
    assert (row.priority, row.tags, row.metadata) == (3, ("bridge",), {"via": "bridge"})


async def test_a_worker_is_woken_at_commit(
    shape: Callable[[str], Any], database_url: str, aclient: wai.AsyncClient
) -> None:
    done = asyncio.Event()

    @aclient.task(SendEmail, queue="bridged")
    async def handle(job: wai.Job[SendEmail]) -> None:
        done.set()

    # Polling every 10 minutes: only the NOTIFY sent at commit can wake the worker in time.
    async with serving(aclient, {"bridged": 1}, poll_interval=600.0):
        await asyncio.sleep(0.2)  # the worker has made its first claim and waits
        async with shape(database_url) as caller:
            await caller.insert(SendEmail(to="x"))
            await asyncio.sleep(0.2)
            assert not done.is_set()
            await caller.commit()
        await asyncio.wait_for(done.wait(), timeout=10)


async def test_unique_conflict_raises_or_returns_the_holder(
    shape: Callable[[str], Any], database_url: str
) -> None:
    async with shape(database_url) as caller:
        first = await caller.insert(SendEmail(to="u"), unique=wai.UniqueOpts())
        with pytest.raises(wai.UniqueConflict) as info:
            await caller.insert(SendEmail(to="u"), unique=wai.UniqueOpts())
        assert info.value.existing_id == first.id
        again = await caller.insert(SendEmail(to="u"), unique=wai.UniqueOpts(on_conflict="skip"))
        assert again == first  # decoded from the stored row as the insert returned it
        await caller.commit()
    assert count_jobs(database_url) == 1


@pytest.mark.parametrize(
    ("args", "options", "error"),
    [
        pytest.param(SendEmail(to="nul\x00"), {}, wai.ValidationError, id="nul-in-args"),
        pytest.param({"s": {1, 2}}, {"kind": "k"}, wai.SerializationError, id="set-in-args"),
        pytest.param(SendEmail(to="x"), {"priority": 5}, wai.ValidationError, id="priority-5"),
        pytest.param(SendEmail(to="x"), {"schema": "No"}, wai.ValidationError, id="bad-schema"),
    ],
)
async def test_bad_input_raises_and_inserts_nothing(
    shape: Callable[[str], Any],
    database_url: str,
    args: Any,
    options: dict[str, Any],
    error: type[Exception],
) -> None:
    async with shape(database_url) as caller:
        with pytest.raises(error):
            await caller.insert(args, **options)
        await caller.insert(SendEmail(to="ok"))  # the transaction is still usable
        await caller.commit()
    assert count_jobs(database_url) == 1


async def test_a_missing_schema_says_to_migrate(
    shape: Callable[[str], Any], database_url: str
) -> None:
    async with shape(database_url) as caller:
        with pytest.raises(wai.SchemaNotMigrated, match="wai --schema elsewhere migrate"):
            await caller.insert(SendEmail(to="x"), schema="elsewhere")
        await caller.rollback()
    assert count_jobs(database_url) == 0


async def test_asyncpg_outside_a_transaction_commits_at_once(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        assert not conn.is_in_transaction()
        row = await wai.bridges.asyncpg.insert_job(conn, SendEmail(to="x"))
    finally:
        await conn.close()
    assert count_jobs(database_url, "id = %s", (row.id,)) == 1


async def test_sqlalchemy_joins_the_transaction_of_the_callers_statements(
    database_url: str,
) -> None:
    """The job and the caller's own rows commit together (asyncpg dialect, whose adapter
    begins at its first statement)."""
    async with _async_engine(database_url, "asyncpg") as engine:
        async with AsyncSession(engine) as session:
            await session.execute(text("CREATE TABLE orders (id int PRIMARY KEY)"))
            await wai.bridges.sqlalchemy.insert_job(session, SendEmail(to="x"))
            await session.rollback()
        async with AsyncSession(engine) as session:
            missing = await session.execute(text("SELECT to_regclass('orders') IS NULL"))
            assert missing.scalar_one()
    assert count_jobs(database_url) == 0


async def test_sqlalchemy_refuses_a_dialect_wai_cannot_bridge() -> None:
    engine = create_engine("sqlite://")
    try:
        with (
            Session(engine) as session,
            pytest.raises(wai.ValidationError, match=r"not sqlite\+pysqlite"),
        ):
            wai.bridges.sqlalchemy.insert_job_sync(session, SendEmail(to="x"))
    finally:
        engine.dispose()


async def test_sqlalchemy_sync_refuses_an_async_dialect(database_url: str) -> None:
    async with _async_engine(database_url, "psycopg") as engine, AsyncSession(engine) as session:
        with pytest.raises(wai.ValidationError, match="asyncio dialect"):
            wai.bridges.sqlalchemy.insert_job_sync(session.sync_session, SendEmail(to="x"))


async def test_inserted_jobs_are_counted_once(
    shape: Callable[[str], Any], database_url: str
) -> None:
    from wai._metrics import METRICS

    key = ("counted", "send_email")
    before = METRICS.inserted.snapshot().get(key, 0)
    async with shape(database_url) as caller:
        await caller.insert(SendEmail(to="c"), queue="counted", unique=wai.UniqueOpts())
        await caller.insert(
            SendEmail(to="c"), queue="counted", unique=wai.UniqueOpts(on_conflict="skip")
        )
        await caller.commit()
    assert METRICS.inserted.snapshot().get(key, 0) == before + 1  # a skipped duplicate is not
