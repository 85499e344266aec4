"""Long handlers: alive and busy is not dead; past the deadline is over, whatever it returns.

- A plain ``def`` handler runs in a thread; the heartbeat runs on the event loop. A
  CPU-bound pure-Python loop drops the GIL every few milliseconds, so the heartbeat keeps
  going and rescue leaves the attempt alone however long it runs.
- A ``def`` handler past its deadline cannot be interrupted: its own worker records the
  attempt as failed (``TimeoutError``: retryable, or failed when no attempts are left)
  and ignores the thread's late result. If the worker could not even do that, rescue
  closes the attempt ``heartbeat_interval`` after the deadline.
- An ``async def`` handler that blocks its event loop past the deadline stalls its whole
  worker (heartbeats and outcomes included): maintenance in another process rescues it
  as ``deadline_exceeded``, and the late result its worker writes afterwards is fenced.

- ``def`` handlers that ignore their deadline keep their threads, and their slots with
  them: the worker claims no job it has no thread for, so none times out unstarted.

Where rescue matters, the maintenance leader is another process than the one running
the long handler, so that rescue keeps running whatever happens to that worker's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest

import wai
from tests.faults._contract import Db, Workers, check_contract, wait_for
from tests.faults._tasks import DEADLINE, Blocker, Hog, Overrun, Spin

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


async def _leader_elsewhere(db: Db, workers: Workers, url: str) -> asyncio.subprocess.Process:
    """A process that only leads maintenance (rescue every 0.5 s); it serves an idle queue."""
    leader = await workers.spawn_ready(db, url, "work=1", app="fault-leader")
    await wait_for(
        lambda: _is(db.leader_pid(), leader.pid), 20, what="the leader", diagnose=workers.output
    )
    return leader


async def _is(value: Awaitable[Any], expected: Any) -> bool:
    return (await value) == expected


async def test_cpu_bound_sync_handler_outliving_staleness_is_not_rescued(
    database_url: str, workers: Workers
) -> None:
    db = Db(database_url)
    await db.install_probes()
    leader = await _leader_elsewhere(db, workers, database_url)
    # heartbeat every 0.5 s, presumed dead after 1.5 s: each job spins 5 s
    busy = await workers.spawn_ready(
        db, database_url, "cpu=2", app="fault-busy", maintenance=False, staleness=1.5
    )
    ids = await db.insert(wai.EnqueueRequest(Spin(seconds=5), queue="cpu") for _ in range(2))

    beats: set[Any] = set()

    async def finished() -> bool:
        rows = await db.rows(
            "SELECT heartbeat_at FROM wai.jobs WHERE id = ANY(%s) AND state = 'running'", (ids,)
        )
        beats.update(r[0] for r in rows)
        return await db.count("id = ANY(%s) AND state = 'completed'", (ids,)) == len(ids)

    await wait_for(finished, 40, what="both spins to complete", diagnose=workers.output)
    seen = await check_contract(db, ids)
    for job_id in ids:
        assert seen.jobs[job_id] == ("completed", 1, 1, [])  # first attempt, no error
        assert seen.finals[job_id] == [(1, "completed")]
        assert seen.runs[job_id] == [(1, busy.pid)]
    # the heartbeat moved on while the handlers spun (claim + at least one beat per job)
    assert len(beats) > len(ids)
    assert [await workers.stop(p) for p in (busy, leader)] == [0, 0], workers.output()


async def test_sync_handler_past_its_deadline_is_fenced_and_retried(
    database_url: str, workers: Workers
) -> None:
    db = Db(database_url)
    await db.install_probes()
    leader = await _leader_elsewhere(db, workers, database_url)
    worker = await workers.spawn_ready(
        db, database_url, "deadline=2", app="fault-slow", maintenance=False
    )
    # each handler outlives its 0.5 s deadline, waits until its attempt has been closed
    # behind its back, then returns normally: a late "completed" that must change nothing
    retried, exhausted = await db.insert(
        [
            wai.EnqueueRequest(Overrun(), queue="deadline"),
            wai.EnqueueRequest(Overrun(), queue="deadline", max_attempts=1),
        ]
    )
    ids = [retried, exhausted]

    async def settled() -> bool:
        late = await db.value("SELECT count(*) FROM late")
        done = await db.count("id = %s AND state = 'completed'", (retried,))
        failed = await db.count("id = %s AND state = 'failed'", (exhausted,))
        return late == 2 and done == 1 and failed == 1

    await wait_for(settled, 40, what="both jobs to settle", diagnose=workers.output)
    seen = await check_contract(db, ids, failed=[exhausted])
    late = {
        job_id: (lease, at, closed)
        for job_id, lease, at, closed in await db.rows(
            "SELECT l.job_id, l.run_lease, l.at, f.at FROM late l"
            " JOIN finalizations f USING (job_id, run_lease)"
        )
    }
    for job_id in ids:
        lease, returned_at, closed_at = late[job_id]
        assert lease == 1
        assert returned_at > closed_at  # it returned after its attempt was closed
        error = seen.jobs[job_id][3][0]
        assert error["attempt"] == 1
        # recorded by its own worker (the usual case) or, failing that, by rescue
        assert (
            error["error"].startswith(f"TimeoutError: deadline of {DEADLINE:g}s exceeded")
            or error.get("rescued") == "deadline_exceeded"
        ), error
    # not completed by the late attempt: retried, and the second attempt completed
    assert seen.finals[retried] == [(1, "retryable"), (2, "completed")]
    assert seen.jobs[retried][:3] == ("completed", 2, 2)
    assert seen.runs[retried] == [(1, worker.pid), (2, worker.pid)]
    # no attempt left: failed, and the late result did not complete it
    assert seen.finals[exhausted] == [(1, "failed")]
    assert seen.jobs[exhausted][:3] == ("failed", 1, 1)
    assert [await workers.stop(p) for p in (worker, leader)] == [0, 0], workers.output()


async def test_async_handler_blocking_its_loop_past_the_deadline_is_rescued_and_fenced(
    database_url: str, workers: Workers
) -> None:
    db = Db(database_url)
    await db.install_probes()
    leader = await _leader_elsewhere(db, workers, database_url)
    worker = await workers.spawn_ready(
        db, database_url, "blocking=1", app="fault-blocked", maintenance=False
    )
    # the handler blocks its event loop (no heartbeat, no outcome, no deadline timer)
    # until maintenance elsewhere has rescued the attempt, then returns normally
    (job_id,) = await db.insert([wai.EnqueueRequest(Blocker(), queue="blocking")])

    async def done() -> bool:
        return await db.count("id = %s AND state = 'completed'", (job_id,)) == 1

    await wait_for(done, 40, what="the job to complete", diagnose=workers.output)
    seen = await check_contract(db, [job_id])
    _, attempt, lease, errors = seen.jobs[job_id]
    assert (attempt, lease) == (2, 2)
    assert [(e["attempt"], e.get("rescued")) for e in errors] == [(1, "deadline_exceeded")]
    # the late "completed" of lease 1 changed nothing; lease 2 completed the job
    assert seen.finals[job_id] == [(1, "retryable"), (2, "completed")]
    assert seen.runs[job_id] == [(1, worker.pid), (2, worker.pid)]
    assert await db.rows("SELECT job_id, run_lease FROM late") == [(job_id, 1)]
    assert [await workers.stop(p) for p in (worker, leader)] == [0, 0], workers.output()


async def test_a_deadline_deaf_sync_handler_keeps_its_slot_until_its_thread_ends(
    database_url: str, workers: Workers
) -> None:
    """Fill a worker's slots and threads with deadline-deaf sync handlers, then add a job.

    The worker serves ``hog=4``: 4 slots and a pool of 4 threads. Each hog outlives its
    deadline, so its attempt is closed (failed: one attempt only), but its thread stays
    busy until the test releases it, and so does its slot: the worker must not claim a
    job it has no thread for, which would reach its deadline unstarted.
    """
    db = Db(database_url)
    await db.install_probes()
    await db.rows("CREATE TABLE released (at timestamptz DEFAULT now())")
    worker = await workers.spawn_ready(db, database_url, "hog=4", app="fault-hogged")
    hogs = await db.insert(
        wai.EnqueueRequest(Hog(hold=True), queue="hog", max_attempts=1) for _ in range(4)
    )

    async def hogs_failed() -> bool:
        return await db.count("id = ANY(%s) AND state = 'failed'", (hogs,)) == len(hogs)

    try:
        await wait_for(
            hogs_failed, 30, what="the hogs to pass their deadline", diagnose=workers.output
        )
        assert await db.value("SELECT count(*) FROM late") == 0  # every thread still held
        (quick,) = await db.insert([wai.EnqueueRequest(Hog(), queue="hog", max_attempts=1)])
        # four deadlines' worth of waiting: with the slots freed it would have been
        # claimed at once and failed unstarted after one
        await asyncio.sleep(4 * DEADLINE)
        assert await db.count("id = %s AND state = 'available'", (quick,)) == 1
        assert await db.rows("SELECT run_lease FROM runs WHERE job_id = %s", (quick,)) == []
    finally:
        await db.rows("INSERT INTO released DEFAULT VALUES")
    await wait_for(
        lambda: _is(db.value("SELECT count(*) FROM late"), len(hogs)), 30, what="the hogs to end"
    )

    async def completed() -> bool:
        return await db.count("id = %s AND state = 'completed'", (quick,)) == 1

    await wait_for(completed, 30, what="the quick job to complete", diagnose=workers.output)
    # it ran once, on its only attempt, once a thread was free
    assert await db.rows("SELECT run_lease FROM runs WHERE job_id = %s", (quick,)) == [(1,)]
    await check_contract(db, [*hogs, quick], failed=hogs)
    assert await workers.stop(worker) == 0, workers.output()
