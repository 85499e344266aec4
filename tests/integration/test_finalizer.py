"""The finalizer's batching against a real PostgreSQL: when it waits for more outcomes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

import wai
from tests.integration._helpers import Work, wait_for
from wai._context import AttemptState
from wai._job import JobRow
from wai._outcomes import Outcome
from wai.worker import _finalizer
from wai.worker import _queries as worker_db
from wai.worker._finalizer import Finalizer

pytestmark = pytest.mark.timeout(30)


async def running(client: wai.AsyncClient) -> JobRow:
    await client.insert(Work(), queue="q")
    async with client._connection() as conn:
        [row] = await worker_db.job_claim(
            conn, client.schema, queue="q", limit=1, deadlines={}, default_deadline=None
        )
    return row


def completed(row: JobRow) -> Outcome:
    return Outcome(
        job_id=row.id, run_lease=row.run_lease, state=wai.JobState.COMPLETED, event="completed"
    )


@pytest.mark.parametrize(("busy", "written_at_once"), [(0, True), (1, False)])
async def test_a_batch_waits_for_more_outcomes_only_while_handlers_run(
    aclient: wai.AsyncClient, busy: int, written_at_once: bool
) -> None:
    written: list[Sequence[tuple[Outcome, AttemptState]]] = []
    finalizer = Finalizer(
        aclient.pool,
        aclient.schema,
        batch_size=512,
        flush_interval=30.0,  # far longer than the test: only "nothing is running" flushes
        on_committed=lambda batch, rows: written.append(batch),
        registry=aclient.registry,
        busy=lambda: busy,
    )
    task = asyncio.create_task(finalizer.run_forever())
    try:
        row = await running(aclient)
        finalizer.submit(completed(row), AttemptState(row, asyncio.get_running_loop()))
        if written_at_once:
            await wait_for(lambda: written, what="the batch written")
            assert [outcome.job_id for outcome, _ in written[0]] == [row.id]
            assert (await aclient.get_job(row.id)).state == "completed"
        else:
            await asyncio.sleep(0.5)
            assert written == []
            assert (await aclient.get_job(row.id)).state == "running"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_unexpected_error_costs_only_the_outcome_that_caused_it(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    written: list[int] = []
    finalizer = Finalizer(
        aclient.pool,
        aclient.schema,
        batch_size=512,
        flush_interval=0.0,
        on_committed=lambda batch, rows: written.extend(o.job_id for o, _ in batch),
        registry=aclient.registry,
        busy=lambda: 0,
    )
    rows = [await running(aclient) for _ in range(5)]
    poison = rows[3].id
    real = _finalizer.apply_outcomes

    async def broken_by_one(
        conn: object, schema: str, registry: object, outcomes: Sequence[Outcome], **kw: object
    ) -> object:
        if any(o.job_id == poison and o.state is wai.JobState.COMPLETED for o in outcomes):
            raise RuntimeError("a bug")
        return await real(conn, schema, registry, outcomes, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_finalizer, "apply_outcomes", broken_by_one)
    task = asyncio.create_task(finalizer.run_forever())
    try:
        loop = asyncio.get_running_loop()
        for row in rows:
            finalizer.submit(completed(row), AttemptState(row, loop))
        await wait_for(lambda: len(written) == 5, what="every outcome settled")
        await finalizer.wait_idle()
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    for row in rows:
        job = await aclient.get_job(row.id)
        if row.id != poison:
            assert job.state == "completed"
            continue
        # Recorded as a failed attempt, readable, with backoff: never left running.
        assert job.state == "retryable"
        assert job.attempt == 1
        assert "could not write this attempt's outcome (completed)" in job.errors[-1]["error"]
        assert "RuntimeError: a bug" in job.errors[-1]["error"]
    assert "its completed outcome could not be written" in caplog.text


@pytest.mark.parametrize("writers", [1, 2])
async def test_writers_bound_how_many_batches_are_written_at_once(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch, writers: int
) -> None:
    written: list[list[int]] = []
    finalizer = Finalizer(
        aclient.pool,
        aclient.schema,
        batch_size=1,  # one outcome per batch: two submits, two batches
        flush_interval=0.0,
        on_committed=lambda batch, rows: written.append([o.job_id for o, _ in batch]),
        registry=aclient.registry,
        busy=lambda: 0,
        writers=writers,
    )
    real = _finalizer.apply_outcomes
    gate = asyncio.Event()
    entered: list[int] = []

    async def held_first(
        conn: object, schema: str, registry: object, outcomes: list[Outcome], **kw: object
    ) -> object:
        entered.append(outcomes[0].job_id)
        if len(entered) == 1:
            await gate.wait()  # the first batch's write stalls (a slow commit, say)
        return await real(conn, schema, registry, outcomes, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_finalizer, "apply_outcomes", held_first)
    task = asyncio.create_task(finalizer.run_forever())
    try:
        first, second = await running(aclient), await running(aclient)
        loop = asyncio.get_running_loop()
        finalizer.submit(completed(first), AttemptState(first, loop))
        await wait_for(lambda: entered, what="the first write started")
        finalizer.submit(completed(second), AttemptState(second, loop))
        if writers == 2:
            # the second batch does not wait behind the stalled first one
            await wait_for(lambda: written == [[second.id]], what="the second batch written")
            assert (await aclient.get_job(second.id)).state == "completed"
        else:
            await asyncio.sleep(0.3)
            assert entered == [first.id]
            assert written == []
        assert (await aclient.get_job(first.id)).state == "running"
        idle = asyncio.create_task(finalizer.wait_idle())
        await asyncio.sleep(0.05)
        assert not idle.done()  # a batch still being written is not idle
        gate.set()
        await asyncio.wait_for(idle, 5)
        assert sorted(map(tuple, written)) == sorted([(first.id,), (second.id,)])
        assert (await aclient.get_job(first.id)).state == "completed"
        assert (await aclient.get_job(second.id)).state == "completed"
    finally:
        gate.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_cancelling_the_finalizer_cancels_its_writes_too(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[int] = []
    finalizer = Finalizer(
        aclient.pool,
        aclient.schema,
        batch_size=512,
        flush_interval=0.0,
        on_committed=lambda batch, rows: written.extend(o.job_id for o, _ in batch),
        registry=aclient.registry,
        busy=lambda: 0,
        writers=2,
    )
    real = _finalizer.apply_outcomes
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def stalled(*args: object, **kwargs: object) -> object:
        started.set()
        try:
            await asyncio.sleep(30)  # the server does not answer
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_finalizer, "apply_outcomes", stalled)
    task = asyncio.create_task(finalizer.run_forever())
    row = await running(aclient)
    finalizer.submit(completed(row), AttemptState(row, asyncio.get_running_loop()))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 5)
    assert cancelled.is_set()  # no write left running behind a stopped runtime
    assert written == []
    assert (await aclient.get_job(row.id)).state == "running"  # for rescue
