from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import LiteralString, cast

import psycopg
import pytest
from psycopg import sql

import wai
from tests.factories import SendEmail, count_jobs, table_exists
from wai._migrate import migrations, script
from wai.errors import SchemaNotMigrated, ValidationError

ALL = [m.version for m in migrations()]


def ledger(url: str, schema: str = "wai") -> list[int]:
    query = sql.SQL("SELECT version FROM {}.migrations ORDER BY version").format(
        sql.Identifier(schema)
    )
    with psycopg.connect(url) as conn:
        rows = conn.execute(query).fetchall()
    return [r[0] for r in rows]


async def test_migrate_applies_everything_then_nothing(empty_database_url: str) -> None:
    async with wai.AsyncClient(empty_database_url) as client:
        assert await client.pending_migrations() == ALL
        assert await client.migrate() == ALL
        assert await client.migrate() == []
        assert await client.pending_migrations() == []
        await client.check_schema()
    assert ledger(empty_database_url) == ALL
    assert table_exists(empty_database_url, "wai.jobs")


def test_migrate_sync_applies_everything_then_nothing(empty_database_url: str) -> None:
    with wai.Client(empty_database_url) as client:
        assert client.pending_migrations() == ALL
        assert client.migrate() == ALL
        assert client.migrate() == []
        client.check_schema()
    assert ledger(empty_database_url) == ALL


async def test_template_database_is_fully_migrated(aclient: wai.AsyncClient) -> None:
    assert await aclient.pending_migrations() == []
    assert await aclient.migrate() == []
    await aclient.check_schema()


async def test_concurrent_async_migrators_apply_once(empty_database_url: str) -> None:
    async with (
        wai.AsyncClient(empty_database_url) as first,
        wai.AsyncClient(empty_database_url) as second,
    ):
        results = await asyncio.gather(first.migrate(), second.migrate())
        await first.check_schema()
        await second.check_schema()
    assert sorted(results, key=len) == [[], ALL]
    assert ledger(empty_database_url) == ALL


def test_concurrent_thread_migrators_apply_once(empty_database_url: str) -> None:
    barrier = threading.Barrier(2)

    def migrate() -> list[int]:
        with wai.Client(empty_database_url) as client:
            barrier.wait(timeout=30)
            return client.migrate()

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = [f.result(timeout=60) for f in [pool.submit(migrate), pool.submit(migrate)]]
    assert sorted(results, key=len) == [[], ALL]
    assert ledger(empty_database_url) == ALL


async def test_custom_schema(empty_database_url: str) -> None:
    async with (
        wai.AsyncClient(empty_database_url, schema="jobs_x") as client,
        await psycopg.AsyncConnection.connect(empty_database_url, autocommit=True) as listener,
    ):
        assert await client.migrate() == ALL
        await listener.execute('LISTEN "jobs_x.jobs"')
        row = await client.insert(SendEmail(to="x@example.com"), queue="mail")
        assert (await client.get_job(row.id)).args == {"to": "x@example.com", "subject": "hello"}
        assert [r.id for r in await client.list_jobs()] == [row.id]
        notes = [n async for n in listener.notifies(timeout=10, stop_after=1)]
        assert [(n.channel, n.payload) for n in notes] == [("jobs_x.jobs", "mail")]
    assert ledger(empty_database_url, "jobs_x") == ALL
    assert count_jobs(empty_database_url, schema="jobs_x") == 1
    assert not table_exists(empty_database_url, "wai.jobs")


async def test_the_jobs_table_is_vacuumed_without_the_cost_delay(empty_database_url: str) -> None:
    # migration 0016: this table's autovacuum visits only, in the schema migrated
    async with wai.AsyncClient(empty_database_url, schema="jobs_x") as client:
        await client.migrate()
    with psycopg.connect(empty_database_url) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.reloptions FROM pg_class AS c"
            " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'jobs_x' AND c.reloptions IS NOT NULL"
        ).fetchall()
    assert rows == [("jobs", ["autovacuum_vacuum_cost_delay=0"])]


async def test_two_schemas_in_one_database_are_independent(database_url: str) -> None:
    async with (
        wai.AsyncClient(database_url) as main,
        wai.AsyncClient(database_url, schema="jobs_x") as other,
    ):
        with pytest.raises(SchemaNotMigrated, match="jobs_x"):
            await other.check_schema()
        assert await other.migrate() == ALL
        await main.insert(SendEmail(to="main"))
        await other.insert(SendEmail(to="other-1"))
        await other.insert(SendEmail(to="other-2"))
        assert [r.args["to"] for r in await main.list_jobs()] == ["main"]
        assert [r.args["to"] for r in await other.list_jobs()] == ["other-2", "other-1"]
    assert count_jobs(database_url) == 1
    assert count_jobs(database_url, schema="jobs_x") == 2


async def test_unmigrated_database_is_reported(empty_database_url: str) -> None:
    async with wai.AsyncClient(empty_database_url) as client:
        assert await client.pending_migrations() == ALL
        with pytest.raises(SchemaNotMigrated, match="wai migrate"):
            await client.check_schema()


def test_unmigrated_database_is_reported_sync(empty_database_url: str) -> None:
    with wai.Client(empty_database_url) as client:
        assert client.pending_migrations() == ALL
        with pytest.raises(SchemaNotMigrated, match="wai migrate"):
            client.check_schema()


async def test_insert_into_unmigrated_database_raises(empty_database_url: str) -> None:
    async with wai.AsyncClient(empty_database_url) as client:
        with pytest.raises(SchemaNotMigrated, match="wai migrate"):
            await client.insert(SendEmail(to="x"))
        with pytest.raises(SchemaNotMigrated):
            await client.insert_many([SendEmail(to="x"), SendEmail(to="y")])
        with pytest.raises(SchemaNotMigrated):
            await client.get_job(1)
        with pytest.raises(SchemaNotMigrated):
            await client.list_jobs()
    # Nothing was created on the way: the schema is still absent.
    assert not table_exists(empty_database_url, "wai.migrations")


def test_insert_into_unmigrated_database_raises_sync(empty_database_url: str) -> None:
    with wai.Client(empty_database_url) as client:
        with pytest.raises(SchemaNotMigrated, match="wai migrate"):
            client.insert(SendEmail(to="x"))
        with pytest.raises(SchemaNotMigrated):
            client.insert_many([SendEmail(to="x")])
    with (
        psycopg.connect(empty_database_url) as conn,
        pytest.raises(SchemaNotMigrated),
    ):
        wai.bridge.insert_job_sync(conn, SendEmail(to="x"))


def test_script_applied_by_hand_is_a_migrated_schema(empty_database_url: str) -> None:
    with psycopg.connect(empty_database_url) as conn:
        # The script is wai's own SQL, rendered for a validated schema name.
        conn.execute(cast(LiteralString, script()))
    with wai.Client(empty_database_url) as client:
        client.check_schema()
        assert client.migrate() == []
        assert client.insert(SendEmail(to="x")).state == wai.JobState.AVAILABLE


def test_client_rejects_a_hostile_schema_before_connecting() -> None:
    with pytest.raises(ValidationError, match="invalid schema name"):
        wai.Client("postgresql://nowhere.invalid/db", schema="wai; drop")
    with pytest.raises(ValidationError, match="invalid schema name"):
        wai.AsyncClient("postgresql://nowhere.invalid/db", schema='wai"; DROP TABLE x; --')
