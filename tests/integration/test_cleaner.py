"""Retention cleanup on a real PostgreSQL: only expired terminal rows go, per-queue overrides."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

import wai
from tests.integration._helpers import Work, fetch, register, serving, wait_for
from wai._sql import query
from wai.maintenance import Cleaner, CleanerResult
from wai.maintenance.cleaner import MIN_WAIT

pytestmark = pytest.mark.timeout(60)

HOUR = 3600.0
DAY = 24 * HOUR
STATES = [s.value for s in wai.JobState]
TERMINAL = ("completed", "failed", "cancelled")


async def _job(client: wai.AsyncClient, state: str, *, age: float | None, queue: str = "q") -> int:
    """A job forced into ``state`` whose ``finalized_at`` is ``age`` seconds ago (None: NULL).

    Non-terminal rows get an old ``finalized_at`` too when asked, the hostile case:
    cleanup must go by state first.
    """
    row = await client.insert(Work(), queue=queue)
    await fetch(
        client,
        "UPDATE wai.jobs SET state = %s::wai.job_state,"
        " finalized_at = CASE WHEN %s::float8 IS NULL THEN NULL"
        " ELSE now() - make_interval(secs => %s::float8) END,"
        " run_at = now() - interval '30 days', created_at = now() - interval '30 days'"
        " WHERE id = %s",
        (state, age, age, row.id),
    )
    return row.id


async def _ids(client: wai.AsyncClient) -> set[int]:
    return {r[0] for r in await fetch(client, "SELECT id FROM wai.jobs")}


async def _override(client: wai.AsyncClient, queue: str, **retention: str | None) -> None:
    await fetch(
        client,
        "INSERT INTO wai.queues (name, completed_retention, failed_retention, cancelled_retention)"
        " VALUES (%s, %s::interval, %s::interval, %s::interval)",
        (
            queue,
            retention.get("completed"),
            retention.get("failed"),
            retention.get("cancelled"),
        ),
    )


def _cleaner(client: wai.AsyncClient, **overrides: Any) -> Cleaner:
    options: dict[str, Any] = {
        "interval": 60,
        "completed": HOUR,
        "failed": 2 * HOUR,
        "cancelled": 3 * HOUR,
        **overrides,
    }
    return Cleaner(client.pool, client.schema, **options)


async def test_cleaner_deletes_only_terminal_rows_past_their_retention(
    aclient: wai.AsyncClient,
) -> None:
    # expired: each terminal state just past its own retention
    expired = {
        await _job(aclient, "completed", age=HOUR + 60),
        await _job(aclient, "failed", age=2 * HOUR + 60),
        await _job(aclient, "cancelled", age=3 * HOUR + 60),
        await _job(aclient, "completed", age=30 * DAY),
    }
    kept = {
        # each terminal state just inside its retention (which differs per state)
        await _job(aclient, "completed", age=HOUR - 60),
        await _job(aclient, "failed", age=2 * HOUR - 60),
        await _job(aclient, "cancelled", age=3 * HOUR - 60),
        await _job(aclient, "failed", age=HOUR + 60),  # older than completed's retention
    }
    # every live state, with an ancient finalized_at and with none at all
    for state in STATES:
        if state not in TERMINAL:
            kept.add(await _job(aclient, state, age=365 * DAY))
            kept.add(await _job(aclient, state, age=None))

    result = await _cleaner(aclient).run_once()

    assert result == CleanerResult({"completed": 2, "failed": 1, "cancelled": 1})
    assert await _ids(aclient) == kept
    assert not expired & await _ids(aclient)
    assert await _cleaner(aclient).run_once() == CleanerResult({})  # nothing left to do


async def test_cleaner_applies_per_queue_overrides(aclient: wai.AsyncClient) -> None:
    await _override(aclient, "keep", completed="30 days")  # longer than the default
    await _override(aclient, "short", failed="1 minute", cancelled="2 minutes")
    await _override(aclient, "nulls")  # a row with no override at all: defaults
    gone = {
        await _job(aclient, "completed", age=31 * DAY, queue="keep"),
        await _job(aclient, "failed", age=90, queue="short"),
        await _job(aclient, "cancelled", age=150, queue="short"),
        await _job(aclient, "completed", age=HOUR + 60, queue="short"),  # default applies
        await _job(aclient, "completed", age=HOUR + 60, queue="nulls"),
        await _job(aclient, "failed", age=2 * HOUR + 60, queue="keep"),  # only completed set
    }
    kept = {
        await _job(aclient, "completed", age=2 * DAY, queue="keep"),
        await _job(aclient, "failed", age=30, queue="short"),
        await _job(aclient, "cancelled", age=90, queue="short"),
        await _job(aclient, "failed", age=90, queue="q"),  # no queues row: defaults
        await _job(aclient, "available", age=365 * DAY, queue="short"),
        await _job(aclient, "running", age=365 * DAY, queue="short"),
    }

    result = await _cleaner(aclient).run_once()

    assert result.deleted == {"completed": 3, "failed": 2, "cancelled": 1}
    assert await _ids(aclient) == kept
    assert not gone & kept


async def test_cleaner_deletes_in_bounded_batches(aclient: wai.AsyncClient) -> None:
    for _ in range(10):
        await _job(aclient, "completed", age=2 * HOUR)
    live = await _job(aclient, "available", age=None)

    first = await _cleaner(aclient, batch_size=3, max_batches=2).run_once()
    assert first.deleted == {"completed": 6}  # two batches of three, then the pass ends
    second = await _cleaner(aclient, batch_size=3, max_batches=5).run_once()
    assert second.deleted == {"completed": 4}  # 3 + 1: a short batch ends the pass
    assert await _ids(aclient) == {live}


async def test_a_cleanup_pass_stops_at_its_time_budget(aclient: wai.AsyncClient) -> None:
    for _ in range(43):
        await _job(aclient, "completed", age=2 * HOUR)
    # a budget already spent: one batch, then the pass ends with the backlog left
    first = await _cleaner(aclient, batch_size=3, budget=0).run_once()
    assert first.deleted == {"completed": 3}
    # the default budget: batches go on until none is full, past the old 32-batch cap
    second = await _cleaner(aclient, batch_size=1).run_once()
    assert second.deleted == {"completed": 40}
    assert await _ids(aclient) == set()


async def test_batches_of_a_pass_go_on_from_where_the_last_one_ended(
    aclient: wai.AsyncClient,
) -> None:
    # Ten rows finalized at the same instant, cut into batches of three: a batch that
    # starts after the previous one's last finalized_at (not at it) would leave some.
    for _ in range(10):
        await _job(aclient, "completed", age=2 * HOUR)
    await fetch(aclient, "UPDATE wai.jobs SET finalized_at = now() - interval '2 hours'")
    # A failed row older than them, kept by its longer retention: passed over by every
    # batch after the first, and still there after the pass.
    kept = await _job(aclient, "failed", age=3 * HOUR)
    await _override(aclient, "q", failed="1 day")
    result = await _cleaner(aclient, batch_size=3).run_once()
    assert result.deleted == {"completed": 10}
    assert await _ids(aclient) == {kept}


async def test_a_pass_starts_where_the_last_one_ended_and_once_an_interval_at_the_oldest(
    aclient: wai.AsyncClient,
) -> None:
    # A snapshot held open keeps the index entries of every row deleted since it began: a
    # pass from the oldest entry would walk them all, each pass.
    await _job(aclient, "completed", age=2 * HOUR)
    cleaner = _cleaner(aclient, interval=2.0)  # the next pass comes well within it
    assert (await cleaner.run_once()).deleted == {"completed": 1}
    # expired, but older than the last row deleted (a finalized_at taken before that pass,
    # committed after it): the next pass starts past it, at the last row deleted ...
    older = await _job(aclient, "completed", age=3 * HOUR)
    await _job(aclient, "completed", age=HOUR + 60)
    assert (await cleaner.run_once()).deleted == {"completed": 1}
    assert await _ids(aclient) == {older}
    # ... and the first pass an interval after the last one from the oldest starts there
    await asyncio.sleep(2.1)
    assert (await cleaner.run_once()).deleted == {"completed": 1}
    assert await _ids(aclient) == set()


async def test_batches_take_the_oldest_rows_whatever_the_plan(aclient: wai.AsyncClient) -> None:
    # Rows stored in neither finalized order nor its reverse, read through connections
    # that may not walk an index: a batch taken in the order of a scan or of a hash join
    # would end at a newer row than some it left, and the batches after it, starting
    # there, would leave those older ones for the next pass.
    for minutes in (7, 19, 2, 14, 11, 5, 17, 1, 9, 20, 4, 13, 8, 16, 3, 12, 18, 6, 10, 15):
        await _job(aclient, "completed", age=HOUR + 60 * minutes)
    async with AsyncConnectionPool[AsyncConnection[Any]](
        aclient.database_url,
        kwargs={"options": "-c enable_indexscan=off -c enable_bitmapscan=off"},
        min_size=1,
        max_size=2,
        open=False,
    ) as pool:
        result = await Cleaner(
            pool, aclient.schema, interval=60, completed=HOUR, failed=HOUR, cancelled=HOUR,
            batch_size=3,
        ).run_once()  # fmt: skip
    assert result.deleted == {"completed": 20}
    assert await _ids(aclient) == set()


async def test_cleanup_query_can_use_the_finalized_index(aclient: wai.AsyncClient) -> None:
    await _override(aclient, "short", failed="1 minute")
    async with aclient._connection() as conn:
        await conn.execute("SET enable_seqscan = off")
        cur = await conn.execute(
            "EXPLAIN " + query("job_delete_finalized", "wai"),
            {"completed": HOUR, "failed": HOUR, "cancelled": HOUR, "limit": 1000, "after": None},
        )
        plan = "\n".join(r[0] for r in await cur.fetchall())
    assert "jobs_finalized_idx" in plan


async def test_queue_config_retention_is_stored_and_applied_by_the_leader(
    aclient: wai.AsyncClient,
) -> None:
    register(aclient, "async", lambda job: None)
    await _override(aclient, "other", failed="5 days")  # a stored value is never cleared
    old_q = await _job(aclient, "completed", age=120, queue="q")  # past q's 60 s override
    old_other = await _job(aclient, "completed", age=120, queue="other")  # default: 1 day
    queues = {
        "q": wai.QueueConfig(concurrency=2, retention=60),
        "other": wai.QueueConfig(concurrency=1),
    }
    async with serving(aclient, queues, cleanup_interval=0.1):
        rows = await fetch(
            aclient,
            "SELECT name, extract(epoch FROM completed_retention)::float8,"
            " extract(epoch FROM failed_retention)::float8"
            " FROM wai.queues ORDER BY name",
        )
        assert rows == [("other", None, 5 * DAY), ("q", 60.0, None)]

        async def gone() -> bool:
            return old_q not in await _ids(aclient)

        await wait_for(gone, 10, what="the leader's cleanup")
        assert old_other in await _ids(aclient)


async def _outbox(client: wai.AsyncClient, *, age: float, outcome: str = "cancelled") -> int:
    """An outbox row of a fresh job, created ``age`` seconds ago; returns the row's id."""
    row = await client.insert(Work(), queue="q")
    rows = await fetch(
        client,
        "INSERT INTO wai.outbox (job_id, run_lease, kind, outcome, job, created_at)"
        " SELECT j.id, j.run_lease, j.kind, %s, to_jsonb(j),"
        " now() - make_interval(secs => %s::float8)"
        " FROM wai.jobs AS j WHERE j.id = %s RETURNING id",
        (outcome, age, row.id),
    )
    return rows[0][0]


async def _outbox_ids(client: wai.AsyncClient) -> set[int]:
    return {r[0] for r in await fetch(client, "SELECT id FROM wai.outbox")}


async def _holder(client: wai.AsyncClient, *specs: tuple[str, str]) -> None:
    """A live process record holding follow-up specs for these (kind, outcome) pairs."""
    await fetch(
        client,
        "INSERT INTO wai.runtime_instances (instance_id, hostname, pid, version, role, specs)"
        " VALUES ('holder', 'h', 1, 'x', 'worker', %s::jsonb)",
        (json.dumps([{"kind": k, "outcome": o, "spec": "s"} for k, o in specs]),),
    )


async def test_outbox_retention_deletes_only_orphaned_rows(aclient: wai.AsyncClient) -> None:
    await _holder(aclient, ("work", "rescued"))
    orphans = {
        await _outbox(aclient, age=HOUR + 60),
        await _outbox(aclient, age=30 * DAY, outcome="completed"),
    }
    # Rows that hold follow-ups to dispatch stay, however old: a live process holds
    # specs for the first; the others failed (so some process held specs once).
    dispatchable = await _outbox(aclient, age=30 * DAY, outcome="rescued")
    failing = await _outbox(aclient, age=30 * DAY)
    failed = await _outbox(aclient, age=30 * DAY, outcome="completed")
    await fetch(
        aclient,
        "UPDATE wai.outbox SET attempts = 3, last_error = 'boom',"
        " next_attempt_at = now() + interval '1 hour' WHERE id = %s",
        (failing,),
    )
    await fetch(
        aclient,
        "UPDATE wai.outbox SET attempts = 10, last_error = 'boom', failed_at = now() WHERE id = %s",
        (failed,),
    )
    # A pair some process registered a spec for once, though none is live now: its rows
    # wait for that deployment to come back (or for an operator), never for a timer.
    await fetch(
        aclient, "INSERT INTO wai.followup_specs (kind, outcome) VALUES ('work', 'exhausted')"
    )
    registered_once = await _outbox(aclient, age=30 * DAY, outcome="exhausted")

    young = await _outbox(aclient, age=HOUR - 60)
    jobs = await _ids(aclient)

    result = await _cleaner(aclient, outbox=HOUR).run_once()

    assert result == CleanerResult({}, outbox=len(orphans))
    assert await _outbox_ids(aclient) == {dispatchable, failing, failed, young, registered_once}
    assert await _ids(aclient) == jobs  # the jobs themselves are not the outbox's business
    assert await _cleaner(aclient, outbox=HOUR).run_once() == CleanerResult({})


async def test_outbox_cleanup_is_batched_and_skips_rows_a_sweeper_holds(
    aclient: wai.AsyncClient,
) -> None:
    old = [await _outbox(aclient, age=2 * DAY) for _ in range(7)]
    held = old[0]
    async with aclient._connection() as conn, conn.transaction():
        # a sweeper dispatching the oldest row right now holds its lock
        await conn.execute("SELECT 1 FROM wai.outbox WHERE id = %s FOR UPDATE", (held,))
        first = await _cleaner(aclient, outbox=DAY, batch_size=2, max_batches=2).run_once()
        assert first.outbox == 4  # two batches of two, then the pass ends
        second = await _cleaner(aclient, outbox=DAY, batch_size=2, max_batches=5).run_once()
        assert second.outbox == 2  # 2 + 0: the held row is skipped, not waited for
        assert await _outbox_ids(aclient) == {held}
    third = await _cleaner(aclient, outbox=DAY).run_once()
    assert third.outbox == 1
    assert await _outbox_ids(aclient) == set()


async def test_the_leader_applies_outbox_retention(aclient: wai.AsyncClient) -> None:
    register(aclient, "async", lambda job: None)
    old = await _outbox(aclient, age=120)
    recent = await _outbox(aclient, age=0)
    async with serving(aclient, cleanup_interval=0.1, outbox_retention=60):

        async def gone() -> bool:
            return old not in await _outbox_ids(aclient)

        await wait_for(gone, 10, what="the leader's outbox cleanup")
        assert recent in await _outbox_ids(aclient)


async def test_a_starting_runtime_records_the_pairs_it_holds_specs_for(
    aclient: wai.AsyncClient,
) -> None:
    @aclient.task(Work, queue="q")
    async def work(job: wai.Job[Work]) -> None:
        return None

    aclient.on_cancelled_enqueue(Work, lambda args, job, reason: Work())
    aclient.on_rescued_enqueue(Work, lambda args, job, reason: Work())
    async with serving(aclient, {"q": 1}):
        pass
    rows = await fetch(aclient, "SELECT kind, outcome FROM wai.followup_specs ORDER BY outcome")
    assert rows == [("work", "cancelled"), ("work", "rescued")]
    # so an old outbox row of those pairs outlives every runtime that could dispatch it
    kept = await _outbox(aclient, age=30 * DAY, outcome="cancelled")
    await _cleaner(aclient, outbox=HOUR).run_once()
    assert kept in await _outbox_ids(aclient)


async def test_a_pass_that_deleted_many_jobs_brings_the_next_one_sooner(
    aclient: wai.AsyncClient,
) -> None:
    for _ in range(30):
        await _job(aclient, "completed", age=2 * HOUR)
    cleaner = _cleaner(aclient, batch_size=10)
    assert cleaner.next_wait() == 60
    assert (await cleaner.run_once()).deleted == {"completed": 30}
    # 30 jobs expired over the first pass's span (one interval): a batch of 10 every 20 s
    assert cleaner.next_wait() == pytest.approx(20.0)
    assert await cleaner.run_once() == CleanerResult({})
    assert cleaner.next_wait() == 60  # nothing left: back to the interval


async def test_a_pass_stopped_with_rows_left_comes_back_at_the_shortest_wait(
    aclient: wai.AsyncClient,
) -> None:
    for _ in range(9):
        await _job(aclient, "completed", age=2 * HOUR)
    cleaner = _cleaner(aclient, batch_size=3, max_batches=2)
    assert (await cleaner.run_once()).deleted == {"completed": 6}
    assert cleaner.next_wait() == MIN_WAIT
    assert (await cleaner.run_once()).deleted == {"completed": 3}


async def test_outbox_and_dlq_retention_run_once_an_interval_however_often_jobs_go(
    aclient: wai.AsyncClient,
) -> None:
    cleaner = _cleaner(aclient, interval=0.5, outbox=HOUR)
    first = await _outbox(aclient, age=2 * HOUR)
    assert (await cleaner.run_once()).outbox == 1
    second = await _outbox(aclient, age=2 * HOUR)
    assert (await cleaner.run_once()).outbox == 0  # within the interval: jobs only
    assert second in await _outbox_ids(aclient)
    await asyncio.sleep(0.6)
    assert (await cleaner.run_once()).outbox == 1
    assert {first, second}.isdisjoint(await _outbox_ids(aclient))
