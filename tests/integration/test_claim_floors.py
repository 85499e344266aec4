"""Claim floors: claims walk each priority from a floor that no available job lies below.

wai.worker._floors holds the reasoning; these tests hold it to a real PostgreSQL: a job
committed late by a long transaction, jobs made available again, moved to another
priority, a held snapshot that keeps every dead index entry, and the migration that
numbers the jobs of an existing database.
"""

from __future__ import annotations

import asyncio
from typing import Any, LiteralString

import psycopg
import pytest

import wai
from tests.factories import Counter
from tests.integration._helpers import (
    Work,
    count,
    register,
    runtime_of,
    serving,
    wait_for,
)
from wai._job import JobRow
from wai._migrate import ledger_sql, migrations
from wai._sql import query
from wai.worker import _queries as worker_db
from wai.worker._floors import NO_FLOORS, Floors

pytestmark = pytest.mark.timeout(120)


def _jobs(numbers: range, **options: Any) -> list[wai.EnqueueRequest]:
    return [wai.EnqueueRequest(Counter(n), queue="q", **options) for n in numbers]


async def _probe(client: wai.AsyncClient, floors: Floors, queue: str = "q") -> None:
    async with client._connection() as conn:
        await worker_db.job_ready_probe(conn, client.schema, queue=queue, floors=floors)


async def _claim(
    client: wai.AsyncClient, floors: Floors, limit: int = 100, queue: str = "q"
) -> list[JobRow]:
    async with client._connection() as conn:
        return await worker_db.job_claim(
            conn,
            client.schema,
            queue=queue,
            limit=limit,
            floors=floors.values,
            deadlines={},
            default_deadline=None,
        )


async def _complete(client: wai.AsyncClient, rows: list[JobRow]) -> None:
    async with client._connection() as conn:
        await conn.execute(
            "UPDATE wai.jobs SET state = 'completed', finalized_at = now() WHERE id = ANY (%s)",
            ([r.id for r in rows],),
        )


async def _settle(client: wai.AsyncClient, floors: Floors) -> None:
    """Probe until a probe that read the sequence at least as far as now is settled: until
    every transaction that may hold a number up to it has ended (on the whole server:
    other tests' transactions too)."""
    async with client._connection() as conn:
        cur = await conn.execute(query("job_ready_seq_read", client.schema))
        [top] = await cur.fetchone() or [0]
    async with asyncio.timeout(60):
        while floors.settled_top < top:
            await asyncio.sleep(0.01)
            await _probe(client, floors)


async def test_a_probe_draws_no_warning_and_keeps_the_prepared_statements(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    await aclient.insert_many(_jobs(range(3)))
    notices: list[tuple[str | None, str | None]] = []
    floors = Floors()
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append((d.severity, d.message_primary)))
        await conn.execute("SELECT %s::int", (1,), prepare=True)
        for _ in range(3):
            await worker_db.job_ready_probe(conn, aclient.schema, queue="q", floors=floors)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        # the statements the connection prepared (a claim's) stay prepared
        prepared = await conn.execute("SELECT count(*) FROM pg_prepared_statements")
        assert await prepared.fetchone() == (1,)
        # a probe that fails inside its block leaves the connection out of it, usable
        with pytest.raises(psycopg.errors.UndefinedTable):
            await worker_db.job_ready_probe(conn, "nowhere", queue="q", floors=Floors())
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert await (await conn.execute("SELECT 1")).fetchone() == (1,)
    # a ROLLBACK or COMMIT ending a pipeline's implicit transaction draws a WARNING in the
    # server's log at every probe (ten a second per busy queue)
    assert notices == []


@pytest.mark.parametrize("others", [5, 0])
async def test_a_job_committed_late_by_a_long_transaction_is_claimed(
    aclient: wai.AsyncClient, database_url: str, others: int
) -> None:
    # The long transaction inserts first, so its job holds the lowest number; the jobs
    # inserted and claimed meanwhile would carry a careless floor past it. Without them
    # (others=0), its transaction id is the newest on the server and no snapshot lists
    # it as running (a snapshot's xmax is the newest id that ended, plus one): a floor
    # moved when no transaction is listed would pass it too.
    with psycopg.connect(database_url) as late:
        [late_id] = late.execute(
            "INSERT INTO wai.jobs (kind, queue, args) VALUES ('counter', 'q', '{\"n\": 0}')"
            " RETURNING id"
        ).fetchone() or [None]
        if others:
            await aclient.insert_many(_jobs(range(1, others + 1)))
        floors = Floors()
        for _ in range(3):
            await _probe(aclient, floors)
            taken = await _claim(aclient, floors)
            await _complete(aclient, taken)
        assert floors.values[1] == 0  # the long transaction still runs: nothing moved
        late.commit()
    await _settle(aclient, floors)
    taken = await _claim(aclient, floors)
    assert [r.id for r in taken] == [late_id]


async def test_the_floors_pass_over_taken_jobs_while_a_snapshot_is_held(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    with psycopg.connect(database_url) as held:
        held.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        held.execute("SELECT id FROM wai.jobs LIMIT 1").fetchall()  # the snapshot is taken
        await aclient.insert_many(_jobs(range(3000)))
        floors = Floors()
        for _ in range(30):
            await _probe(aclient, floors)
            await _complete(aclient, await _claim(aclient, floors))
        await aclient.insert_many(_jobs(range(10)))
        await _settle(aclient, floors)
        assert floors.values[1] > 3000  # lane 2, where every job went

        # What the claim reads of jobs_ready_idx (entries returned by the index, dead or
        # alive, counted in the claim's own transaction, then rolled back): from the
        # floors, about the jobs it takes; from the start of the lane, also every entry
        # of the 3,000 jobs taken before, which the snapshot keeps alive.
        async def entries(values: tuple[int, ...]) -> int:
            read: LiteralString = (
                "SELECT pg_stat_get_xact_tuples_returned('wai.jobs_ready_idx'::regclass)"
            )
            async with aclient._connection() as conn:
                cur = await conn.execute(read)
                [before] = await cur.fetchone() or [0]
                await worker_db.job_claim(
                    conn,
                    aclient.schema,
                    queue="q",
                    limit=10,
                    floors=values,
                    deadlines={},
                    default_deadline=None,
                )
                cur = await conn.execute(read)
                [after] = await cur.fetchone() or [0]
                await conn.rollback()
            return int(after) - int(before)

        from_floors, from_start = await entries(floors.values), await entries(NO_FLOORS)
        assert from_floors <= 20, from_floors
        assert from_start >= 3000, from_start
        held.rollback()


async def test_jobs_made_available_again_or_moved_are_claimed_above_the_floors(
    aclient: wai.AsyncClient,
) -> None:
    await aclient.insert_many(_jobs(range(4)))
    floors = Floors()
    await _probe(aclient, floors)
    first = await _claim(aclient, floors)
    assert len(first) == 4
    await _complete(aclient, first[1:])
    again, moved = first[0], first[1]
    await aclient.insert_many(_jobs(range(99, 100), priority=3))
    await _settle(aclient, floors)
    assert min(floors.values) > max(r.id for r in first)  # past every number seen so far
    # A retry that became due (running -> available), and a finished job put back by hand
    # at another priority: each takes a new number, above the floors.
    async with aclient._connection() as conn:
        await conn.execute("UPDATE wai.jobs SET state = 'available' WHERE id = %s", (again.id,))
        await conn.execute(
            "UPDATE wai.jobs SET state = 'available', priority = 1, finalized_at = NULL"
            " WHERE id = %s",
            (moved.id,),
        )
    assert [r.id for r in await _claim(aclient, floors, limit=1)] == [moved.id]  # priority 1
    ids = {r.id for r in await _claim(aclient, floors)}
    assert again.id in ids
    assert len(ids) == 2


async def test_aging_moves_a_job_to_the_end_of_its_new_lane(aclient: wai.AsyncClient) -> None:
    [a] = await aclient.insert_many(_jobs(range(1, 2), priority=3))
    [b] = await aclient.insert_many(_jobs(range(2, 3), priority=2))
    floors = Floors()
    await _settle(aclient, floors)
    async with aclient._connection() as conn:
        await conn.execute("UPDATE wai.jobs SET priority = 2 WHERE id = %s", (a.id,))
    ids = [r.id for r in await _claim(aclient, floors, limit=1)]
    assert ids == [b.id]
    ids = [r.id for r in await _claim(aclient, floors, limit=1)]
    assert ids == [a.id]


async def test_a_worker_moves_its_floors_as_it_claims(aclient: wai.AsyncClient) -> None:
    register(aclient, "async", lambda job: None)
    async with serving(aclient, {"q": 20}):
        # Six rounds of 150 jobs, 0.3 s apart: the worker probes before a claim once 0.1 s
        # and 100 claimed jobs have passed since its last probe.
        for n in range(1, 7):
            await aclient.insert_many([wai.EnqueueRequest(Work(), queue="q") for _ in range(150)])

            async def done(n: int = n) -> bool:
                return await count(aclient, "state = 'completed'") == 150 * n

            await wait_for(done, 30, what=f"{150 * n} jobs completed")
            await asyncio.sleep(0.3)
        floors = runtime_of(aclient).producers["q"].floors
    # Lane 2 held all 900 jobs, numbered from 1.
    assert floors.values[1] > 300, floors.values
    assert floors.settled_top >= 300


async def test_an_available_job_without_a_number_is_refused(aclient: wai.AsyncClient) -> None:
    async with aclient._connection() as conn:
        with pytest.raises(psycopg.errors.CheckViolation):
            await conn.execute(
                "INSERT INTO wai.jobs (kind, queue, ready_seq) VALUES ('counter', 'q', NULL)"
            )


async def test_the_migration_numbers_available_jobs_in_their_old_claim_order(
    empty_database_url: str,
) -> None:
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute(ledger_sql("wai"))
        for m in migrations():
            if m.version >= 14:
                break
            with conn.transaction():
                conn.execute(m.rendered("wai").encode())
                conn.execute(
                    "INSERT INTO wai.migrations (version, name) VALUES (%s, %s)",
                    (m.version, m.name),
                )
        # Available jobs in an order the ids do not follow, and a scheduled one.
        rows: list[tuple[int, str, str]] = [
            (2, "now() - interval '1 minute'", "available"),
            (1, "now()", "available"),
            (2, "now() - interval '2 minutes'", "available"),
            (4, "now() - interval '1 hour'", "available"),
            (2, "now() + interval '1 hour'", "scheduled"),
        ]
        for priority, run_at, state in rows:
            text: LiteralString = (
                "INSERT INTO wai.jobs (kind, queue, priority, run_at, state)"
                " VALUES ('counter', 'q', %s, {run_at}, %s)"
            )
            conn.execute(text.replace("{run_at}", run_at).encode(), (priority, state))
        old_order = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM wai.jobs WHERE state = 'available' ORDER BY priority, run_at, id"
            )
        ]
    async with wai.AsyncClient(empty_database_url) as client:
        assert await client.migrate() == [m.version for m in migrations() if m.version >= 14]
        async with client._connection() as conn:
            cur = await conn.execute(
                "SELECT id FROM wai.jobs WHERE state = 'available' ORDER BY ready_seq"
            )
            assert [r[0] for r in await cur.fetchall()] == old_order
            cur = await conn.execute("SELECT ready_seq FROM wai.jobs WHERE state = 'scheduled'")
            assert await cur.fetchall() == [(None,)]
        floors = Floors()
        await _settle(client, floors)
        taken = [r.id for r in await _claim(client, floors, limit=1)]
        assert taken == old_order[:1]
        [new] = await client.insert_many(_jobs(range(5, 6), priority=1))
        assert [r.id for r in await _claim(client, floors, limit=1)] == [new.id]
        for expected in old_order[1:]:
            assert [r.id for r in await _claim(client, floors, limit=1)] == [expected]
