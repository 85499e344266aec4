"""SIGKILL of a worker process mid-handler and mid-finalization (SPEC §12).

A killed worker writes nothing more: its attempts stay ``running`` under their lease
with an ageing heartbeat. A surviving worker takes the maintenance lease over, rescues
them once the heartbeat is ``heartbeat_staleness`` old, and runs them again under a
new lease. A batch of outcomes that no follow-up spec or hook reads is written by one
autocommitted statement: PostgreSQL finishes and commits it even after its client died,
whole (those handlers did finish). A batch with follow-ups is one transaction, rolled
back with the dead session (``test_followup_crash.py``).
"""

from __future__ import annotations

import pytest

import wai
from tests.faults._contract import Db, Workers, check_contract, wait_for
from tests.faults._tasks import Mark

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


async def test_sigkill_mid_handler_jobs_are_rescued_and_finished_by_the_survivor(
    database_url: str, workers: Workers
) -> None:
    db = Db(database_url)
    await db.install_probes()
    victim = await workers.spawn_ready(db, database_url, "work=20", app="fault-victim")
    await wait_for(db.leader_pid, 20, what="a maintenance leader")

    # 20 jobs whose first attempt hangs: all of them in the victim's handlers
    ids = await db.insert(
        wai.EnqueueRequest(Mark(n=i, first_sleep=120), queue="work") for i in range(20)
    )

    async def all_started() -> bool:
        return await db.value("SELECT count(*) FROM runs") == len(ids)

    await wait_for(all_started, 20, what="the victim to start every job", diagnose=workers.output)
    survivor = await workers.spawn_ready(db, database_url, "work=20", app="fault-survivor")
    assert await db.count("state = 'running'") == len(ids)  # the survivor found nothing to do

    await workers.kill(victim)
    # a little ordinary work for the survivor while it waits to take over
    ids += await db.insert(wai.EnqueueRequest(Mark(n=i), queue="work") for i in range(20, 40))

    async def all_done() -> bool:
        return await db.count("state = 'completed'") == len(ids)

    await wait_for(all_done, 40, what="every job to complete", diagnose=workers.output)
    seen = await check_contract(db, ids)

    assert await db.leader_pid() == survivor.pid
    for job_id in ids[:20]:
        state, attempt, lease, errors = seen.jobs[job_id]
        assert (state, attempt, lease) == ("completed", 2, 2)
        assert [e.get("rescued") for e in errors] == ["stale_heartbeat"]
        assert seen.finals[job_id] == [(1, "retryable"), (2, "completed")]
        assert seen.runs[job_id] == [(1, victim.pid), (2, survivor.pid)]
    assert await workers.stop(survivor) == 0, workers.output()


async def test_sigkill_mid_finalization_loses_no_job_and_applies_no_outcome_twice(
    database_url: str, workers: Workers
) -> None:
    db = Db(database_url)
    await db.install_probes()
    # every completion the victim writes costs 20 ms of server time inside its finalize
    # transaction: its batches stay open long enough to be killed while being written
    await db.slow_finalize("fault-victim", 0.02)
    victim = await workers.spawn_ready(db, database_url, "work=10", app="fault-victim")
    # every tenth job's first attempt takes half a second: whenever the kill lands, some
    # attempt of the victim has run without its outcome written, however many batches its
    # finalizer has in flight (those the orphaned backends finish)
    ids = await db.insert(
        wai.EnqueueRequest(Mark(n=i, first_sleep=0.5 if i % 10 == 0 else 0.0), queue="work")
        for i in range(300)
    )

    async def some_committed() -> bool:
        return await db.count("state = 'completed'") >= 20

    await wait_for(some_committed, 30, what="a first finalized batch", diagnose=workers.output)

    async def writing() -> int | None:
        rows = await db.rows(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = 'fault-victim' AND wait_event = 'PgSleep'"
            " AND xact_start IS NOT NULL"
        )
        return rows[0][0] if rows else None

    # the victim's session is inside a finalize transaction, writing outcomes: kill it now
    backend = await wait_for(writing, 30, what="a finalize in progress", interval=0.01)
    await workers.kill(victim)
    committed_at_kill = await db.count("state = 'completed'")
    assert committed_at_kill < len(ids)

    survivor = await workers.spawn_ready(db, database_url, "work=10", app="fault-survivor")

    async def all_done() -> bool:
        return await db.count("state = 'completed'") == len(ids)

    await wait_for(all_done, 60, what="every job to complete", diagnose=workers.output)
    seen = await check_contract(db, ids)

    # handlers that the victim had run (lease 1) but whose outcome it never wrote were
    # rescued, and those jobs completed under lease 2
    rerun = {
        job_id
        for job_id in ids
        if seen.runs[job_id][0] == (1, victim.pid) and seen.jobs[job_id][2] == 2
    }
    assert rerun, f"no outcome of the victim was lost: the kill missed its attempts ({backend})"
    # the statement the orphaned backend was running finished whole: every completion the
    # victim's sessions started to write committed, none was applied twice (check_contract)
    done_by_victim = [
        job_id for job_id in ids if seen.finals[job_id] == [(1, "completed")]
        and seen.runs[job_id] == [(1, victim.pid)]
    ]  # fmt: skip
    assert await db.slow_finalize_rows() == len(done_by_victim)
    for job_id in rerun:
        assert seen.finals[job_id] == [(1, "retryable"), (2, "completed")]
        assert seen.runs[job_id] == [(1, victim.pid), (2, survivor.pid)]
    # nothing the victim committed was undone or applied again
    assert len(done_by_victim) >= committed_at_kill
    assert await workers.stop(survivor) == 0, workers.output()
