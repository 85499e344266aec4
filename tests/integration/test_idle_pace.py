"""Idle loops back off only while LISTEN delivers, and wake for what makes work due.

The loops (a queue's poll, promotion, cron) and their pure decision are in wai._pace;
these tests run them on a real PostgreSQL: the ``<schema>.due`` triggers of migration
0013, the LISTEN probe, a promoter asleep for long that a scheduled job or a retry
still wakes on time, and claim counts with LISTEN and without.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

import wai
from tests.integration._helpers import (
    Work,
    db_now,
    fetch,
    notes,
    register,
    runtime_of,
    serving,
    wait_for,
    wait_job,
)
from wai import _db_async as db
from wai.maintenance import CronFirer

pytestmark = pytest.mark.timeout(90)


async def test_due_notes_come_from_what_makes_promotion_or_cron_due_and_nothing_else(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(db.due_channel("wai"))))
        now = await db_now(aclient)

        available = await aclient.insert(Work(n=1))
        assert await notes(conn) == []  # the hot path sends none

        await aclient.insert(Work(n=2), run_at=now + timedelta(hours=1))
        assert await notes(conn) == [""]

        # a hundred scheduled rows in one transaction: one note (PostgreSQL folds them)
        later = now + timedelta(hours=1)
        await aclient.insert_many([wai.EnqueueRequest(Work(n=i), run_at=later) for i in range(100)])
        assert await notes(conn) == [""]

        await fetch(aclient, "UPDATE wai.jobs SET state = 'running' WHERE id = %s", (available.id,))
        assert await notes(conn) == []
        await fetch(
            aclient, "UPDATE wai.jobs SET state = 'retryable' WHERE id = %s", (available.id,)
        )
        assert await notes(conn) == [""]
        # run_at moved on a waiting job (an operator's change): due again
        await fetch(
            aclient,
            "UPDATE wai.jobs SET run_at = run_at + interval '1 s' WHERE id = %s",
            (available.id,),
        )
        assert await notes(conn) == [""]

        aclient.periodic("every-second", "* * * * * *", Work(n=3), queue="cron")
        await aclient.upsert_cron()
        assert await notes(conn) == [""]  # a new schedule
        await aclient.pause_cron("every-second")
        await aclient.resume_cron("every-second")
        assert await notes(conn) == ["", ""]  # two transactions: a note each
        await asyncio.sleep(1.1)
        result = await CronFirer(aclient.pool, "wai", interval=1).run_once()
        assert result.fired == {"every-second": 1}
        assert await notes(conn) == []  # firing moves the cursor and inserts available jobs


async def test_the_cron_pass_knows_its_next_fire(aclient: wai.AsyncClient) -> None:
    firer = CronFirer(aclient.pool, "wai", interval=1)
    assert (await firer.run_once()).due_in is None  # no schedule
    aclient.periodic("five-seconds", "*/5 * * * * *", Work(n=1), queue="cron")
    aclient.periodic("hourly", "@hourly", Work(n=2), queue="cron")
    await aclient.upsert_cron()
    result = await firer.run_once()
    assert result.due_in is not None
    assert 0 < result.due_in <= 5
    await aclient.pause_cron("five-seconds")
    result = await firer.run_once()
    assert result.due_in is not None
    assert 5 < result.due_in <= 3600


async def test_the_listen_probe_proves_delivery_and_is_redone_after_a_reconnect(
    aclient: wai.AsyncClient,
) -> None:
    register(aclient, "async", lambda job: None)
    async with serving(aclient):
        notifier = runtime_of(aclient).notifier
        assert notifier is not None
        await wait_for(lambda: notifier.delivering, timeout=10)
        # the server ends the LISTEN connection: delivery is unproven until a new probe
        await fetch(
            aclient,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN%%'",
        )
        await wait_for(lambda: not notifier.delivering, timeout=10)
        await wait_for(lambda: notifier.delivering, timeout=20)
        row = await aclient.insert(Work())
        await wait_job(aclient, row.id, "completed", timeout=10)


async def test_an_idle_queue_polls_less_only_while_listen_delivers(
    database_url: str,
) -> None:
    claims: dict[str, int] = {}
    for name, listen_url in (("listening", None), ("polling", "")):
        async with wai.AsyncClient(database_url, listen_url=listen_url) as client:
            register(client, "async", lambda job: None)
            async with serving(client, poll_interval=0.05, idle_poll_interval=600):
                runtime = runtime_of(client)
                notifier = runtime.notifier
                if listen_url is None:
                    assert notifier is not None
                    await wait_for(lambda n=notifier: n.delivering, timeout=10)
                before = runtime.producers["q"].claims
                await asyncio.sleep(3)
                claims[name] = runtime.producers["q"].claims - before
    # every 0.05 s without LISTEN (about 60 claims in 3 s); doubling waits with it
    # (0.05, 0.1, 0.2 ... about 6)
    assert claims["polling"] >= 30, claims
    assert claims["listening"] <= 12, claims


async def test_an_idle_promoter_wakes_for_a_job_scheduled_while_it_sleeps(
    aclient: wai.AsyncClient,
) -> None:
    register(aclient, "async", lambda job: None)
    async with serving(aclient, promote_interval=0.5, idle_poll_interval=600):
        notifier = runtime_of(aclient).notifier
        assert notifier is not None
        await wait_for(lambda: notifier.delivering, timeout=10)
        # idle passes at about 0, 0.5, 1.5, 3.5, 7.5, then 15.5 s: at 9.5 s the promoter is
        # in its 8-s wait, and nothing scheduled was there to bound it
        await asyncio.sleep(9.5)
        run_at = await db_now(aclient) + timedelta(seconds=0.5)
        started = time.monotonic()
        row = await aclient.insert(Work(), run_at=run_at)
        done = await wait_job(aclient, row.id, "completed", timeout=10)
    assert done.attempted_at is not None
    # promoted at its time (a note woke the promoter, which slept until run_at), not
    # at the end of a long idle wait
    assert done.attempted_at - run_at < timedelta(seconds=2)
    assert time.monotonic() - started < 5


async def test_an_idle_promoter_wakes_for_a_retry(aclient: wai.AsyncClient) -> None:
    attempts: list[float] = []

    @aclient.task(Work, queue="q")
    async def flaky(job: wai.Job[Work]) -> wai.RetryAfter | None:
        attempts.append(time.monotonic())
        return wai.RetryAfter(0.5) if len(attempts) == 1 else None

    async with serving(aclient, promote_interval=0.5, idle_poll_interval=600):
        notifier = runtime_of(aclient).notifier
        assert notifier is not None
        await wait_for(lambda: notifier.delivering, timeout=10)
        await asyncio.sleep(9.5)  # the promoter is in its 8-s wait (see the test above)
        row = await aclient.insert(Work())
        await wait_job(aclient, row.id, "completed", timeout=10)
    assert len(attempts) == 2
    # 0.5 s of backoff, then promoted on time, not when the 8-s wait ends
    assert attempts[1] - attempts[0] < 3
