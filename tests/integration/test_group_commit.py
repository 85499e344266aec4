"""AsyncClient(group_commit=True): concurrent inserts in one statement, each caller its own.

Also the single insert's statement sent without a cursor (wai._direct_async), which group
commit writes a lone insert with.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

import wai
from tests.factories import SendEmail, count_jobs, execute

# A row the server refuses although the client accepted it: the poison of a group.
POISON_TRIGGER = """
CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.args ->> 'to' = 'poison' THEN
        RAISE EXCEPTION 'poisoned row' USING ERRCODE = '22023';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_poison BEFORE INSERT ON wai.jobs
    FOR EACH ROW EXECUTE FUNCTION refuse_poison();
"""


@pytest.fixture
async def grouped(database_url: str) -> AsyncIterator[wai.AsyncClient]:
    async with wai.AsyncClient(database_url, group_commit=True) as client:
        yield client


async def gather_inserts(
    client: wai.AsyncClient, items: list[tuple[SendEmail, dict[str, object]]]
) -> list[wai.JobRow | BaseException]:
    """Every item inserted by a task of its own, all at once; rows or errors, in order."""
    return await asyncio.wait_for(
        asyncio.gather(
            *(client.insert(args, **opts) for args, opts in items),  # pyright: ignore[reportArgumentType]
            return_exceptions=True,
        ),
        timeout=30,
    )


def created_ats(url: str) -> int:
    """How many distinct transaction timestamps the jobs were created at (one per commit)."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(DISTINCT created_at) FROM wai.jobs").fetchone()
    assert row is not None
    return int(row[0])


async def test_each_caller_gets_its_own_row(grouped: wai.AsyncClient, database_url: str) -> None:
    rows = await gather_inserts(grouped, [(SendEmail(to=f"u{i}"), {}) for i in range(50)])
    assert all(isinstance(r, wai.JobRow) for r in rows)
    jobs = [r for r in rows if isinstance(r, wai.JobRow)]
    assert [r.args["to"] for r in jobs] == [f"u{i}" for i in range(50)]
    assert len({r.id for r in jobs}) == 50
    for row in jobs[::10]:
        assert await grouped.get_job(row.id) == row
    assert count_jobs(database_url) == 50
    # far fewer commits than inserts: the calls that arrived together shared one
    assert created_ats(database_url) < 10


async def test_a_lone_insert_and_options(grouped: wai.AsyncClient) -> None:
    row = await grouped.insert(
        SendEmail(to="x"), queue="mail", priority=1, tags=['a"b', "c\\d", "é"], metadata={"k": 1}
    )
    assert await grouped.get_job(row.id) == row
    assert row.tags == ('a"b', "c\\d", "é")


async def test_a_unique_conflict_fails_only_its_caller(
    grouped: wai.AsyncClient, database_url: str
) -> None:
    held = await grouped.insert(SendEmail(to="held"), unique=wai.UniqueOpts())
    items: list[tuple[SendEmail, dict[str, object]]] = [
        (SendEmail(to=f"u{i}"), {}) for i in range(20)
    ]
    items[10] = (SendEmail(to="held"), {"unique": wai.UniqueOpts()})
    items[12] = (SendEmail(to="held"), {"unique": wai.UniqueOpts(on_conflict="skip")})
    # two callers of one group with one new key: the first inserts, the second conflicts
    items[14] = (SendEmail(to="twice"), {"unique": wai.UniqueOpts()})
    items[15] = (SendEmail(to="twice"), {"unique": wai.UniqueOpts()})
    rows = await gather_inserts(grouped, items)
    conflict = rows[10]
    assert isinstance(conflict, wai.UniqueConflict)
    assert conflict.existing_id == held.id
    skipped = rows[12]
    assert isinstance(skipped, wai.JobRow)
    assert skipped.id == held.id
    first, second = rows[14], rows[15]
    assert isinstance(first, wai.JobRow)
    assert isinstance(second, wai.UniqueConflict)
    assert second.existing_id == first.id
    others = [r for i, r in enumerate(rows) if i not in (10, 12, 14, 15)]
    assert all(isinstance(r, wai.JobRow) for r in others)
    assert count_jobs(database_url) == 1 + 16 + 1


async def test_a_refused_value_fails_only_its_caller(
    grouped: wai.AsyncClient, database_url: str
) -> None:
    execute(database_url, POISON_TRIGGER)
    items: list[tuple[SendEmail, dict[str, object]]] = [
        (SendEmail(to=f"u{i}"), {}) for i in range(20)
    ]
    items[7] = (SendEmail(to="poison"), {})
    rows = await gather_inserts(grouped, items)
    assert isinstance(rows[7], wai.ValidationError)
    assert "poisoned row" in str(rows[7])
    good = [r for i, r in enumerate(rows) if i != 7]
    assert all(isinstance(r, wai.JobRow) for r in good)
    assert count_jobs(database_url) == 19
    assert count_jobs(database_url, "args ->> 'to' = 'poison'") == 0


async def test_committed_when_the_call_returns(grouped: wai.AsyncClient, database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as other:

        async def insert_then_read(i: int) -> bool:
            row = await grouped.insert(SendEmail(to=f"u{i}"))
            cur = await other.execute("SELECT 1 FROM wai.jobs WHERE id = %s", (row.id,))
            return await cur.fetchone() is not None

        seen = await asyncio.wait_for(
            asyncio.gather(*(insert_then_read(i) for i in range(30))), timeout=30
        )
    assert all(seen)


async def test_cancelled_callers_lose_or_duplicate_nobody_else(
    grouped: wai.AsyncClient, database_url: str
) -> None:
    tasks = [asyncio.create_task(grouped.insert(SendEmail(to=f"u{i}"))) for i in range(60)]
    await asyncio.sleep(0)  # the first group is on its way: its callers are cancelled in flight
    for task in tasks[::3]:
        task.cancel()
    await asyncio.sleep(0)
    for task in tasks[1::6]:
        task.cancel()
    done = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=30)
    cancelled = {i for i, r in enumerate(done) if isinstance(r, asyncio.CancelledError)}
    kept = {i: r for i, r in enumerate(done) if isinstance(r, wai.JobRow)}
    assert len(cancelled) + len(kept) == 60
    assert cancelled  # the test cancelled something
    with psycopg.connect(database_url) as conn:
        stored = [r[0] for r in conn.execute("SELECT args ->> 'to' FROM wai.jobs").fetchall()]
    assert len(stored) == len(set(stored))  # nothing twice
    assert {f"u{i}" for i in kept} <= set(stored)  # nothing of a caller that got its row lost
    assert {r.id for r in kept.values()} <= set(await ids(database_url))
    # and the client goes on
    assert isinstance(await grouped.insert(SendEmail(to="after")), wai.JobRow)


async def ids(url: str) -> list[int]:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cur = await conn.execute("SELECT id FROM wai.jobs")
        return [r[0] for r in await cur.fetchall()]


async def test_a_broken_connection_fails_its_group_and_the_next_call_works(
    database_url: str,
) -> None:
    async with wai.AsyncClient(
        database_url, group_commit=True, min_connections=1, max_connections=1
    ) as client:
        await client.insert(SendEmail(to="first"))
        async with client.pool.connection() as conn:
            pid = conn.info.backend_pid
        execute(database_url, "SELECT pg_terminate_backend(%s)", (pid,))
        rows = await gather_inserts(client, [(SendEmail(to=f"u{i}"), {}) for i in range(10)])
        assert all(isinstance(r, psycopg.OperationalError | wai.JobRow) for r in rows)
        failed = [r for r in rows if isinstance(r, psycopg.OperationalError)]
        assert failed  # the group written on the dead connection heard of it
        for _ in range(3):  # the pool replaces the connection; no task of the client died
            try:
                row = await asyncio.wait_for(client.insert(SendEmail(to="after")), timeout=10)
                break
            except psycopg.OperationalError:
                continue
        else:
            pytest.fail("the client never inserted again")
        assert await client.get_job(row.id) == row


async def test_close_writes_the_queued_inserts_first(database_url: str) -> None:
    client = wai.AsyncClient(database_url, group_commit=True)
    await client.open()
    tasks = [asyncio.create_task(client.insert(SendEmail(to=f"u{i}"))) for i in range(40)]
    await asyncio.sleep(0)
    await client.close()
    rows = await asyncio.gather(*tasks)
    assert len({r.id for r in rows}) == 40
    assert count_jobs(database_url) == 40


async def test_transaction_inserts_are_never_grouped(
    grouped: wai.AsyncClient, database_url: str
) -> None:
    async with grouped.transaction() as tx:
        row = await tx.insert(SendEmail(to="in the transaction"))
        await grouped.insert(SendEmail(to="grouped"))  # a group commits meanwhile
        assert count_jobs(database_url, "id = %s", (row.id,)) == 0  # not with it
    assert count_jobs(database_url) == 2


def test_group_commit_must_be_a_bool(database_url: str) -> None:
    with pytest.raises(wai.ValidationError, match="group_commit"):
        wai.AsyncClient(database_url, group_commit="yes")  # pyright: ignore[reportArgumentType]


async def test_a_statement_the_server_lost_is_prepared_again(database_url: str) -> None:
    async with wai.AsyncClient(database_url, max_connections=1) as client:
        await client.insert(SendEmail(to="a"))
        async with client.pool.connection() as conn:
            await conn.execute("DEALLOCATE ALL")
        row = await client.insert(SendEmail(to="b"))
        assert await client.get_job(row.id) == row


async def test_without_prepared_statements_the_insert_prepares_nothing(database_url: str) -> None:
    async with wai.AsyncClient(database_url, prepared_statements=False, max_connections=1) as c:
        for i in range(3):
            await c.insert(SendEmail(to=f"u{i}"), unique=wai.UniqueOpts(by_args=True))
        async with c.pool.connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM pg_prepared_statements")
            assert await cur.fetchone() == (0,)
