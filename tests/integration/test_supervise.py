"""Every background task of a real runtime survives an unexpected exception.

Each test injects one ``RuntimeError`` into a method a loop calls (a fault, not a
mock: the database is real and the method runs for real on every other call), then
shows the runtime still does that task's work: jobs are claimed and completed,
heartbeats advance, the runtime record refreshes, NOTIFY wakes the queue, hooks are
delivered, the elector leads and the leader's services run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from datetime import datetime, timedelta
from typing import Any

import pytest
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

import wai
from tests.integration._helpers import (
    Work,
    db_now,
    fetch,
    register,
    runtime_of,
    serving,
    wait_for,
    wait_gate,
    wait_job,
)
from wai._registry import Registry
from wai.maintenance import OutboxSweeper, Promoter
from wai.maintenance._leader import Elector
from wai.worker import Runtime
from wai.worker import _queries as worker_db
from wai.worker._notifier import Notifier
from wai.worker._producer import QueueProducer
from wai.worker._records import Recorder

pytestmark = pytest.mark.timeout(60)

INJECTED = "injected fault"


def inject(mp: pytest.MonkeyPatch, target: object, name: str) -> list[int]:
    """Make ``target.name`` raise ``RuntimeError`` on its first call only.

    Returns the list of calls so far (one entry per call), to wait for the fault.
    """
    original = getattr(target, name)
    calls: list[int] = []

    if inspect.iscoroutinefunction(original):

        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(len(calls) + 1)
            if len(calls) == 1:
                raise RuntimeError(INJECTED)
            return await original(*args, **kwargs)

        mp.setattr(target, name, async_wrapper)
    else:

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(len(calls) + 1)
            if len(calls) == 1:
                raise RuntimeError(INJECTED)
            return original(*args, **kwargs)

        mp.setattr(target, name, wrapper)
    return calls


async def _fired(calls: list[int]) -> None:
    await wait_for(lambda: calls, 5, what="the injected fault")


def _logged_with_traceback(caplog: pytest.LogCaptureFixture) -> bool:
    return any(
        r.exc_info is not None
        and isinstance(r.exc_info[1], RuntimeError)
        and str(r.exc_info[1]) == INJECTED
        for r in caplog.records
    )


async def _completes(client: wai.AsyncClient, timeout: float = 5.0) -> wai.JobRow:
    row = await client.insert(Work())
    return await wait_job(client, row.id, "completed", timeout=timeout)


async def _heartbeat_at(client: wai.AsyncClient, job_id: int) -> datetime:
    rows = await fetch(client, "SELECT heartbeat_at FROM wai.jobs WHERE id = %s", (job_id,))
    return rows[0][0]


@pytest.fixture(autouse=True)
def _errors_captured(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)


# -- the worker's own loops -----------------------------------------------------------


async def test_claim_loop_survives_an_unexpected_error(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = inject(monkeypatch, QueueProducer, "_claim")
    register(aclient, "async", lambda job: None)
    async with serving(aclient):
        await _fired(calls)
        await _completes(aclient)
        await _completes(aclient)
    assert _logged_with_traceback(caplog)


async def test_finalizer_survives_an_unexpected_error(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # the finalizer's loop asks the runtime whether handlers still run before each batch
    calls = inject(monkeypatch, Runtime, "_running_handlers")
    register(aclient, "async", lambda job: None)
    async with serving(aclient, completion_flush_interval=0.01):
        first = await _completes(aclient)  # its outcome was pending when the fault hit
        assert calls
        await _completes(aclient)
    assert first.state == "completed"
    assert _logged_with_traceback(caplog)


async def test_heartbeat_loop_survives_an_unexpected_error(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = inject(monkeypatch, worker_db, "job_heartbeat_many")
    gate = threading.Event()

    @aclient.task(Work, queue="q")
    async def handler(job: wai.Job[Work]) -> None:
        await wait_gate(gate)

    try:
        async with serving(aclient):
            row = await aclient.insert(Work())
            await wait_job(aclient, row.id, "running")
            await _fired(calls)
            after_fault = await _heartbeat_at(aclient, row.id)

            async def advanced() -> bool:
                return await _heartbeat_at(aclient, row.id) > after_fault

            await wait_for(advanced, 3, what="a heartbeat after the fault")
            gate.set()
            await wait_job(aclient, row.id, "completed")
    finally:
        gate.set()
    assert _logged_with_traceback(caplog)


async def test_progress_that_cannot_be_stored_costs_only_that_progress(
    aclient: wai.AsyncClient,
) -> None:
    """Poison put past set_progress's checks (by hand) never stops the heartbeats."""
    gate = threading.Event()

    @aclient.task(Work, queue="q")
    async def handler(job: wai.Job[Work]) -> None:
        if job.args.n == 1:
            state = job._state  # pyright: ignore[reportPrivateUsage]
            with state.lock:
                state.progress = {"percent": 1, "message": "a\x00b", "metadata": {}}
                state.dirty = True
        else:
            job.set_progress(20, "fine")
        await wait_gate(gate)

    try:
        async with serving(aclient):
            poisoned = await aclient.insert(Work(n=1))
            healthy = await aclient.insert(Work(n=2))
            for row in (poisoned, healthy):
                await wait_job(aclient, row.id, "running")
            marks = {r.id: await _heartbeat_at(aclient, r.id) for r in (poisoned, healthy)}

            async def both_advanced() -> bool:
                for job_id, mark in marks.items():
                    if await _heartbeat_at(aclient, job_id) <= mark:
                        return False
                return True

            await wait_for(both_advanced, 3, what="both heartbeats to advance")
            await wait_job(aclient, healthy.id, lambda r: r.progress is not None)
            gate.set()
            done = await wait_job(aclient, poisoned.id, "completed")
            await wait_job(aclient, healthy.id, "completed")
    finally:
        gate.set()
    assert done.progress is None


async def test_listen_loop_survives_an_unexpected_error(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = inject(monkeypatch, Notifier, "_dispatch")
    register(aclient, "async", lambda job: None)
    # polling every 30 s: only NOTIFY (or the wake-up after a reconnect) claims in time
    async with serving(aclient, poll_interval=30):
        await _completes(aclient)  # its NOTIFY hit the fault; the restart woke the queue
        assert calls
        notifier = runtime_of(aclient).notifier
        assert notifier is not None
        await wait_for(notifier.connected.is_set, 5, what="LISTEN to be back")
        await _completes(aclient)  # woken by NOTIFY again
    assert _logged_with_traceback(caplog)


async def test_runtime_record_loop_survives_an_unexpected_error(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with serving(aclient, record_interval=0.1):
        # injected once start() wrote the record: the fault hits the loop's next refresh
        calls = inject(monkeypatch, Recorder, "snapshot")
        await _fired(calls)
        rows = await fetch(aclient, "SELECT last_seen_at FROM wai.runtime_instances")
        seen = rows[0][0]

        async def refreshed() -> bool:
            rows = await fetch(aclient, "SELECT last_seen_at FROM wai.runtime_instances")
            return rows[0][0] > seen

        await wait_for(refreshed, 5, what="the record to be refreshed after the fault")
    assert _logged_with_traceback(caplog)


async def test_hook_dispatcher_survives_an_unexpected_error(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = inject(monkeypatch, Registry, "hooks_for")
    seen: list[tuple[str, int]] = []
    register(aclient, "async", lambda job: None)
    aclient.on_event(Work, lambda event: seen.append((type(event).__name__, event.job.id)))
    async with serving(aclient):
        await _completes(aclient)
        await _fired(calls)
        later = await _completes(aclient)
        await wait_for(lambda: ("Completed", later.id) in seen, 5, what="a later event")
    assert _logged_with_traceback(caplog)


async def test_outbox_sweeper_survives_an_unexpected_error(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = inject(monkeypatch, OutboxSweeper, "run_once")
    register(aclient, "async", lambda job: None)
    aclient.on_rescued_enqueue(Work, lambda args, job, reason: Work(n=99))
    async with serving(aclient, outbox_interval=0.05, maintenance=False):
        await _fired(calls)
        # a rescue's outbox row: dispatched by a later pass of the sweeper
        row = await aclient.insert(Work(), run_at=(await db_now(aclient)) + timedelta(hours=1))
        await fetch(
            aclient,
            "INSERT INTO wai.outbox (job_id, run_lease, kind, outcome, detail, job)"
            " SELECT id, run_lease, kind, 'rescued', '{\"reason\": \"stale_heartbeat\"}',"
            " to_jsonb(j) FROM wai.jobs AS j WHERE id = %s",
            (row.id,),
        )

        async def followup() -> bool:
            rows = await fetch(
                aclient, "SELECT count(*) FROM wai.jobs WHERE trigger_job_id = %s", (row.id,)
            )
            return rows[0][0] == 1

        await wait_for(followup, 5, what="the outbox row to be dispatched")
    assert _logged_with_traceback(caplog)


# -- the elector and the leader's services --------------------------------------------


async def test_elector_survives_an_unexpected_error(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = inject(monkeypatch, Elector, "attempt")
    register(aclient, "async", lambda job: None)
    async with serving(aclient):
        await _fired(calls)
        elector = runtime_of(aclient).elector
        assert elector is not None
        await wait_for(lambda: elector.is_leader, 5, what="leadership after the fault")
        # the leader's promoter runs: a scheduled job gets due, promoted and run
        due = (await db_now(aclient)) + timedelta(seconds=0.3)
        row = await aclient.insert(Work(), run_at=due)
        await wait_job(aclient, row.id, "completed")
    assert _logged_with_traceback(caplog)


async def test_maintenance_service_survives_an_unexpected_error(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls = inject(monkeypatch, Promoter, "run_once")
    register(aclient, "async", lambda job: None)
    async with serving(aclient):
        await _fired(calls)
        due = (await db_now(aclient)) + timedelta(seconds=0.3)
        row = await aclient.insert(Work(), run_at=due)
        await wait_job(aclient, row.id, "completed")
        assert len(calls) > 1
    assert _logged_with_traceback(caplog)


async def test_a_failing_pass_is_retried_with_backoff_and_cancel_still_stops_it() -> None:
    """The shared loop: failures back off (doubling, capped), a success resets, and a
    cancel ends it even while a pass fails."""
    from wai._supervise import Backoff

    backoff = Backoff(0.5, 3.0)
    assert [backoff.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    backoff.reset()
    assert backoff.next() == 0.5

    from wai._supervise import repeat, supervise

    passes: list[int] = []

    async def always_fails() -> None:
        passes.append(1)
        raise RuntimeError(INJECTED)

    for loop in (
        repeat("test loop", always_fails, interval=0.001, cap=0.001),
        supervise("test loop", always_fails, base=0.001, cap=0.001),
    ):
        passes.clear()
        task = asyncio.create_task(loop)
        await wait_for(lambda: len(passes) >= 3, 5, what="passes after failures")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_database_outage_is_a_warning_without_traceback_a_bug_an_error_with_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A maintenance pass that cannot reach the server: WARNING, no traceback (nothing in
    wai to fix); a pass that fails on a bug: ERROR with its traceback."""
    caplog.set_level(logging.WARNING, logger="wai")
    # Nothing listens on port 1: every connection attempt fails, as when the server is down.
    pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
        "postgresql://postgres@127.0.0.1:1/none", min_size=0, max_size=1, timeout=0.2, open=False
    )
    await pool.open()
    try:
        task = asyncio.create_task(Promoter(pool, "wai", interval=0.01).run_forever())
        await wait_for(
            lambda: [r for r in caplog.records if "Promoter failed" in r.getMessage()],
            10,
            what="the Promoter's failed pass",
        )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        await pool.close()
    outage = next(r for r in caplog.records if "Promoter failed" in r.getMessage())
    assert outage.levelno == logging.WARNING
    assert outage.exc_info is None
    assert "the database is unavailable (PoolTimeout" in outage.getMessage()

    from wai._supervise import repeat

    async def buggy() -> None:
        raise RuntimeError(INJECTED)

    caplog.clear()
    task = asyncio.create_task(repeat("buggy loop", buggy, interval=0.001, cap=0.001))
    await wait_for(lambda: caplog.records, 5, what="the buggy pass")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    bug = caplog.records[0]
    assert (bug.levelno, bug.getMessage()) == (
        logging.ERROR,
        "wai: buggy loop failed; next try in 0.00 s",
    )
    assert _logged_with_traceback(caplog)
