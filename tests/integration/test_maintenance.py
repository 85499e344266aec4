"""Maintenance on a real PostgreSQL: promotion of due jobs and leader election."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

import wai
from tests.integration._helpers import (
    FAST,
    Work,
    count,
    db_now,
    fetch,
    register,
    serving,
    wait_for,
    wait_job,
)
from wai import _db_async as db
from wai.maintenance import Elector, PeriodicService, Promoter, PromoterResult
from wai.maintenance import _queries as maintenance_db

pytestmark = pytest.mark.timeout(60)


def _elector(client: wai.AsyncClient) -> Elector:
    runtime = client._runtime  # pyright: ignore[reportPrivateUsage]
    assert runtime is not None
    assert runtime.elector is not None
    return runtime.elector


async def _leader_ids(client: wai.AsyncClient) -> list[str]:
    return [r[0] for r in await fetch(client, "SELECT leader_id FROM wai.leader")]


# -- promotion ------------------------------------------------------------------------


async def test_scheduled_job_is_promoted_when_due_and_run(aclient: wai.AsyncClient) -> None:
    register(aclient, "async", lambda job: None)
    async with serving(aclient):
        now = await db_now(aclient)
        row = await aclient.insert(Work(), run_at=now + timedelta(seconds=0.8))
        assert row.state == "scheduled"
        assert (await aclient.get_job(row.id)).state == "scheduled"  # not early
        done = await wait_job(aclient, row.id, "completed", timeout=5)

    assert done.attempted_at is not None
    assert done.attempted_at >= row.run_at
    assert done.attempt == 1


async def test_promotion_wakes_an_idle_worker_through_notify(aclient: wai.AsyncClient) -> None:
    register(aclient, "async", lambda job: None)
    async with serving(aclient, poll_interval=30):
        now = await db_now(aclient)
        row = await aclient.insert(Work(), run_at=now + timedelta(seconds=0.5))
        # with a 30 s poll, only the promoter's NOTIFY can get it picked up this fast
        await wait_job(aclient, row.id, "completed", timeout=5)


async def test_promoter_run_once_promotes_only_due_rows(aclient: wai.AsyncClient) -> None:
    now = await db_now(aclient)
    past, future = now - timedelta(seconds=1), now + timedelta(hours=1)
    due_q = await aclient.insert(Work(n=1), queue="q", run_at=past)
    due_other = await aclient.insert(Work(n=2), queue="other", run_at=past)
    due_retry = await aclient.insert(Work(n=3), queue="q", run_at=past)
    later = await aclient.insert(Work(n=4), queue="q", run_at=future)
    later_retry = await aclient.insert(Work(n=5), queue="q", run_at=future)
    running = await aclient.insert(Work(n=6), queue="q", run_at=past)
    available = await aclient.insert(Work(n=7), queue="q")
    await fetch(
        aclient,
        "UPDATE wai.jobs SET state = 'retryable' WHERE id = ANY(%s)",
        ([due_retry.id, later_retry.id],),
    )
    await fetch(aclient, "UPDATE wai.jobs SET state = 'running' WHERE id = %s", (running.id,))

    promoter = Promoter(aclient.pool, aclient.schema, interval=1)
    result = await promoter.run_once()

    assert result.promoted == {"q": 2, "other": 1}
    # the next job due is an hour ahead (the one promoted rows are not counted)
    assert result.due_in is not None
    assert 3500 < result.due_in <= 3600
    states = {
        r[0]: r[1] for r in await fetch(aclient, "SELECT id, state::text FROM wai.jobs ORDER BY id")
    }
    assert states == {
        due_q.id: "available",
        due_other.id: "available",
        due_retry.id: "available",
        later.id: "scheduled",
        later_retry.id: "retryable",
        running.id: "running",
        available.id: "available",
    }
    again = await promoter.run_once()
    assert again.promoted == {}
    assert again.due_in is not None
    assert 3500 < again.due_in <= 3600
    await fetch(aclient, "DELETE FROM wai.jobs WHERE id = ANY(%s)", ([later.id, later_retry.id],))
    assert await promoter.run_once() == PromoterResult({}, None)  # nothing is waiting


async def test_promoter_run_once_works_through_several_batches(aclient: wai.AsyncClient) -> None:
    past = (await db_now(aclient)) - timedelta(seconds=1)
    await aclient.insert_many(
        [wai.EnqueueRequest(Work(n=i), queue="q", run_at=past) for i in range(7)]
    )
    promoter = Promoter(aclient.pool, aclient.schema, interval=1, batch_size=2)
    assert await promoter.run_once() == PromoterResult({"q": 7}, None)
    assert await count(aclient, "state = 'available'") == 7


async def test_promoter_notifies_the_promoted_queues(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    past = (await db_now(aclient)) - timedelta(seconds=1)
    await aclient.insert(Work(), queue="mail", run_at=past)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as listener:
        await listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(db.channel("wai"))))
        await Promoter(aclient.pool, aclient.schema, interval=1).run_once()
        payloads = [n.payload async for n in listener.notifies(timeout=3, stop_after=1)]
    assert payloads == ["mail"]


# -- leader election ------------------------------------------------------------------


async def test_exactly_one_leader_and_failover_on_shutdown(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    other = wai.AsyncClient(database_url)
    async with other:
        try:
            await aclient.start({"q": 1}, **FAST)
            await other.start({"q": 1}, **FAST)
            electors = [_elector(aclient), _elector(other)]
            await wait_for(lambda: sum(e.is_leader for e in electors) == 1, 3)
            (leader,) = [e for e in electors if e.is_leader]
            # over several election intervals, the same single leader holds the lease
            for _ in range(8):
                assert [e.is_leader for e in electors].count(True) == 1
                assert leader.is_leader
                assert await _leader_ids(aclient) == [leader.leader_id]
                await asyncio.sleep(FAST["election_interval"] / 2)

            leading_client, follower_client = (
                (aclient, other) if leader is electors[0] else (other, aclient)
            )
            follower = _elector(follower_client)
            await leading_client.shutdown(timeout=5)
            await wait_for(
                lambda: follower.is_leader, 4 * FAST["election_interval"], what="failover"
            )
            assert await _leader_ids(aclient) == [follower.leader_id]
        finally:
            await aclient.shutdown(timeout=5)
            await other.shutdown(timeout=5)
    assert await _leader_ids(aclient) == []  # the last leader resigned on shutdown


async def test_a_live_lease_is_respected_and_an_expired_one_taken_over(
    aclient: wai.AsyncClient,
) -> None:
    """A leader that vanished without resigning is replaced once its lease expires."""
    await fetch(
        aclient,
        "INSERT INTO wai.leader (name, leader_id, expires_at)"
        " VALUES ('maintenance', 'ghost', now() + interval '1 second')",
    )
    async with serving(aclient, {"q": 1}):
        elector = _elector(aclient)
        await asyncio.sleep(0.5)  # more than two election intervals
        assert not elector.is_leader
        assert await _leader_ids(aclient) == ["ghost"]
        await wait_for(lambda: elector.is_leader, 3, what="takeover after expiry")
        assert await _leader_ids(aclient) == [elector.leader_id]


class _Recorded(PeriodicService):
    """A service that notes when each of its passes began."""

    def __init__(self, client: wai.AsyncClient, passes: list[tuple[str, float]], name: str):
        super().__init__(client.pool, client.schema, interval=60.0)
        self._passes = passes
        self._name = name

    async def run_once(self) -> None:
        self._passes.append((self._name, time.monotonic()))


async def test_a_new_leaders_services_begin_staggered_in_order(aclient: wai.AsyncClient) -> None:
    passes: list[tuple[str, float]] = []
    names = ["first", "second", "third"]
    elector = Elector(
        aclient.pool,
        aclient.schema,
        interval=5,
        services=lambda: [_Recorded(aclient, passes, n) for n in names],
        spread=1.2,  # three services: at 0.3, 0.6 and 0.9 s
    )
    began = time.monotonic()
    task = asyncio.create_task(elector.run_forever())
    try:
        await wait_for(lambda: len(passes) == 3, 5, what="the first passes")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert [name for name, _ in passes] == names
    at = [t - began for _, t in passes]
    assert at[0] >= 0.3 - 0.05  # not at once on election
    assert at[1] - at[0] >= 0.25  # one after another
    assert at[2] - at[1] >= 0.25
    assert await _leader_ids(aclient) == []  # resigned on cancel


async def test_elector_attempt_renews_only_its_own_lease(aclient: wai.AsyncClient) -> None:
    a = Elector(aclient.pool, aclient.schema, interval=5, services=list)
    b = Elector(aclient.pool, aclient.schema, interval=5, services=list)
    assert await a.attempt()
    assert not await b.attempt()
    assert await a.attempt()  # renewal
    assert await _leader_ids(aclient) == [a.leader_id]
    async with aclient._connection() as conn:
        await maintenance_db.leader_resign(
            conn, aclient.schema, name="maintenance", leader_id=b.leader_id
        )
    assert await _leader_ids(aclient) == [a.leader_id]  # b cannot resign a's lease
    async with aclient._connection() as conn:
        await maintenance_db.leader_resign(
            conn, aclient.schema, name="maintenance", leader_id=a.leader_id
        )
    assert await b.attempt()


async def test_maintenance_false_never_leads_nor_promotes(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    leader_client = wai.AsyncClient(database_url)
    async with leader_client:
        try:
            await leader_client.start({"q": 1}, **FAST)
            await aclient.start({"q": 1}, **FAST, maintenance=False)
            runtime = aclient._runtime  # pyright: ignore[reportPrivateUsage]
            assert runtime is not None
            assert runtime.elector is None
            leader = _elector(leader_client)
            await wait_for(lambda: leader.is_leader, 3)
            await leader_client.shutdown(timeout=5)
            assert await _leader_ids(aclient) == []

            past = (await db_now(aclient)) - timedelta(seconds=1)
            row = await aclient.insert(Work(), queue="q", run_at=past)
            await asyncio.sleep(5 * FAST["election_interval"])  # time enough to elect itself
            assert await _leader_ids(aclient) == []
            assert (await aclient.get_job(row.id)).state == "scheduled"  # nobody promotes
        finally:
            await leader_client.shutdown(timeout=5)
            await aclient.shutdown(timeout=5)
