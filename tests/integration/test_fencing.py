"""Run-lease fencing: a stale attempt can change nothing.

While a handler runs, the test changes its row behind the worker's back (as a
rescue + re-claim, or an operator's cancel, would). Whatever the handler then
returns or raises, the finalizer's guarded update must match nothing, and the
row must keep exactly the values written behind the worker's back.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, LiteralString

import pytest

import wai
from tests.integration._helpers import (
    FLAVORS,
    Work,
    attempts_settled,
    fetch,
    serving,
    wait_for,
    wait_gate,
    wait_job,
)
from wai._job import JobState
from wai._outcomes import Outcome
from wai.transitions import _queries as transition_db
from wai.worker import _queries as worker_db

pytestmark = pytest.mark.timeout(60)


def _raise(exc: BaseException) -> Any:
    raise exc


#: What the stale attempt tries to do once the gate opens.
RESULTS: dict[str, Callable[[], Any]] = {
    "complete": lambda: None,
    "retry_after": lambda: wai.RetryAfter(0),
    "raise": lambda: _raise(ValueError("stale failure")),
    "terminal": lambda: _raise(wai.TerminalError("stale terminal failure")),
    "snooze": lambda: wai.Snooze(0),
    "cancel": lambda: wai.Cancel("stale cancel"),
    "bad_return": lambda: 42,
}

#: How the row is changed behind the attempt's back.
MUTATIONS: dict[str, LiteralString] = {
    # rescued and claimed again elsewhere: still running, under a newer lease
    "lease_bumped": "UPDATE wai.jobs SET run_lease = run_lease + 1, attempt = attempt + 1,"
    " heartbeat_at = now() WHERE id = %s",
    # cancelled by an operator
    "cancelled": "UPDATE wai.jobs SET state = 'cancelled', finalized_at = now(),"
    ' errors = errors || \'[{"error": "cancelled by operator"}]\'::jsonb WHERE id = %s',
    # rescued to retryable, due much later (so promotion leaves it alone)
    "rescued": "UPDATE wai.jobs SET state = 'retryable', run_at = now() + interval '1 hour',"
    " heartbeat_at = NULL, deadline_at = NULL,"
    ' errors = errors || \'[{"error": "rescued"}]\'::jsonb WHERE id = %s',
}


def _register(
    client: wai.AsyncClient,
    flavor: str,
    gate: threading.Event,
    result: Callable[[], Any],
    observed: list[bool],
) -> None:
    if flavor == "async":

        @client.task(Work, queue="q")
        async def handler(job: wai.Job[Work]) -> Any:
            await wait_gate(gate)
            observed.append(job.is_cancelled())
            # progress set this late can only be written by the finalizing update
            job.set_progress(99, "stale progress")
            return result()

    else:

        @client.task(Work, queue="q")
        def sync_handler(job: wai.Job[Work]) -> Any:
            gate.wait(10)
            observed.append(job.is_cancelled())
            job.set_progress(99, "stale progress")
            return result()


async def _run_stale_attempt(
    client: wai.AsyncClient, flavor: str, result: str, mutation: str
) -> tuple[wai.JobRow, wai.JobRow, list[bool]]:
    gate = threading.Event()
    observed: list[bool] = []
    _register(client, flavor, gate, RESULTS[result], observed)
    try:
        async with serving(client):
            row = await client.insert(Work())
            await wait_job(client, row.id, "running")
            await fetch(client, MUTATIONS[mutation], (row.id,))
            behind = await client.get_job(row.id)
            # the next heartbeat (every 0.2 s) finds the attempt stale
            runtime = client._runtime  # pyright: ignore[reportPrivateUsage]
            assert runtime is not None
            # the row is running once the claim commits; the worker holds the attempt once
            # the claim's rows are back, a moment later on a busy machine
            (state,) = await wait_for(
                lambda: list(runtime.attempts.values()), 5, what="the worker to hold the attempt"
            )
            await wait_for(state.cancelled.is_set, 2, what="the heartbeat to flag the attempt")
            gate.set()
            await wait_for(lambda: observed, 3, what="the handler to finish")
            await wait_for(lambda: attempts_settled(client), 3, what="the outcome to be dropped")
            after = await client.get_job(row.id)
    finally:
        gate.set()
    return behind, after, observed


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
@pytest.mark.parametrize("result", sorted(RESULTS))
async def test_stale_attempt_changes_nothing(
    aclient: wai.AsyncClient, result: str, mutation: str
) -> None:
    behind, after, observed = await _run_stale_attempt(aclient, "async", result, mutation)
    assert after == behind
    assert observed == [True]  # the heartbeat told the handler it was stale


@pytest.mark.parametrize("result", sorted(RESULTS))
async def test_stale_sync_attempt_changes_nothing(aclient: wai.AsyncClient, result: str) -> None:
    behind, after, observed = await _run_stale_attempt(aclient, "sync", result, "lease_bumped")
    assert after == behind
    assert observed == [True]


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_stale_attempt_cannot_flush_progress(aclient: wai.AsyncClient, flavor: str) -> None:
    gate = threading.Event()
    flushed: list[bool] = []

    if flavor == "async":

        @aclient.task(Work, queue="q")
        async def handler(job: wai.Job[Work]) -> None:
            await wait_gate(gate)
            job.set_progress(70, "stale")
            flushed.append(await job.flush_progress())

    else:

        @aclient.task(Work, queue="q")
        def sync_handler(job: wai.Job[Work]) -> None:
            gate.wait(10)
            job.set_progress(70, "stale")
            flushed.append(job.flush_progress_sync())

    try:
        async with serving(aclient, heartbeat_interval=5, heartbeat_staleness=15):
            row = await aclient.insert(Work())
            await wait_job(aclient, row.id, "running")
            await fetch(aclient, MUTATIONS["lease_bumped"], (row.id,))
            behind = await aclient.get_job(row.id)
            gate.set()
            await wait_for(lambda: flushed, 3)
            await wait_for(lambda: attempts_settled(aclient), 3)
            after = await aclient.get_job(row.id)
    finally:
        gate.set()
    assert flushed == [False]  # flush_progress reports the attempt is no longer live
    assert after == behind
    assert after.progress is None


# -- the guarded statements themselves ------------------------------------------------


async def _claim(client: wai.AsyncClient, limit: int = 1) -> list[wai.JobRow]:
    async with client._connection() as conn:
        return await worker_db.job_claim(
            conn, client.schema, queue="fence", limit=limit, deadlines={}, default_deadline=None
        )


def _completed(job_id: int, lease: int) -> Outcome:
    return Outcome(job_id=job_id, run_lease=lease, state=JobState.COMPLETED, event="completed")


async def _finalize(client: wai.AsyncClient, outcomes: list[Outcome]) -> list[wai.JobRow]:
    async with client._connection() as conn, conn.transaction():
        return await transition_db.job_finalize_many(conn, client.schema, outcomes)


async def test_finalize_with_a_wrong_lease_matches_no_row(aclient: wai.AsyncClient) -> None:
    inserted = await aclient.insert(Work(), queue="fence")
    (claimed,) = await _claim(aclient)
    assert claimed.id == inserted.id
    assert claimed.state == "running"
    assert claimed.run_lease == 1
    running = await aclient.get_job(inserted.id)

    for lease in (0, 2, 99):
        assert await _finalize(aclient, [_completed(inserted.id, lease)]) == []
    retry = Outcome(
        job_id=inserted.id,
        run_lease=2,
        state=JobState.RETRYABLE,
        event="retried",
        delay=1,
        error="stale",
        progress='{"percent": 1}',
    )
    assert await _finalize(aclient, [retry]) == []
    assert await aclient.get_job(inserted.id) == running

    (done,) = await _finalize(aclient, [_completed(inserted.id, 1)])
    assert done.state == "completed"
    assert done.finalized_at is not None
    # the right lease on a row that is no longer running matches nothing either
    assert await _finalize(aclient, [_completed(inserted.id, 1)]) == []
    assert await aclient.get_job(inserted.id) == done


async def test_a_stale_outcome_does_not_spoil_its_batch(aclient: wai.AsyncClient) -> None:
    await aclient.insert_many([wai.EnqueueRequest(Work(n=i), queue="fence") for i in range(3)])
    a, b, c = await _claim(aclient, limit=3)
    rows = await _finalize(
        aclient,
        [_completed(a.id, a.run_lease + 1), _completed(b.id, b.run_lease), _completed(c.id, 7)],
    )
    assert [r.id for r in rows] == [b.id]
    assert (await aclient.get_job(a.id)).state == "running"
    assert (await aclient.get_job(b.id)).state == "completed"
    assert (await aclient.get_job(c.id)).state == "running"


async def test_heartbeat_with_a_wrong_lease_matches_no_row(aclient: wai.AsyncClient) -> None:
    inserted = await aclient.insert(Work(), queue="fence")
    (claimed,) = await _claim(aclient)
    before = await aclient.get_job(inserted.id)
    await asyncio.sleep(0.01)  # make a real heartbeat distinguishable
    async with aclient._connection() as conn:
        live = await worker_db.job_heartbeat_many(
            conn, aclient.schema, [(claimed.id, claimed.run_lease + 1, '{"percent": 5}')]
        )
    assert live == set()
    assert await aclient.get_job(inserted.id) == before

    async with aclient._connection() as conn:
        live = await worker_db.job_heartbeat_many(
            conn, aclient.schema, [(claimed.id, claimed.run_lease, '{"percent": 5}')]
        )
    assert live == {(claimed.id, claimed.run_lease)}
    beat = await aclient.get_job(inserted.id)
    assert beat.heartbeat_at > before.heartbeat_at  # type: ignore[operator]
    assert beat.progress == {"percent": 5}


async def test_finished_heartbeat_is_guarded_skips_locked_rows_and_keeps_progress(
    aclient: wai.AsyncClient,
) -> None:
    for _ in range(3):
        await aclient.insert(Work(), queue="fence")
    a, b, c = await _claim(aclient, limit=3)
    await fetch(
        aclient,
        "UPDATE wai.jobs SET progress = '{\"percent\": 70}', deadline_at = now() + interval '1 s'"
        " WHERE id = ANY(%s)",
        ([a.id, b.id, c.id],),
    )
    await fetch(aclient, "UPDATE wai.jobs SET state = 'cancelled' WHERE id = %s", (c.id,))
    before = {r.id: await aclient.get_job(r.id) for r in (a, b, c)}
    await asyncio.sleep(0.01)  # make a real heartbeat distinguishable
    attempts = [(a.id, a.run_lease + 1), (b.id, b.run_lease), (c.id, c.run_lease)]
    async with aclient._connection() as locker, locker.transaction():
        await locker.execute("SELECT 1 FROM wai.jobs WHERE id = %s FOR UPDATE", (b.id,))
        async with aclient._connection() as conn:
            # a wrong lease, a row locked by someone else, a row no longer running
            assert await worker_db.job_heartbeat_finished(conn, aclient.schema, attempts) == set()
    assert {r.id: await aclient.get_job(r.id) for r in (a, b, c)} == before

    async with aclient._connection() as conn:
        assert await worker_db.job_heartbeat_finished(conn, aclient.schema, attempts) == {b.id}
    beat = await aclient.get_job(b.id)
    assert beat.heartbeat_at > before[b.id].heartbeat_at  # type: ignore[operator]
    assert beat.deadline_at is None  # the handler's deadline no longer applies
    assert beat.progress == {"percent": 70}  # left to the outcome
    assert beat.state == "running"
