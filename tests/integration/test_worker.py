"""The worker runtime on a real PostgreSQL: outcomes, deadlines, progress, heartbeats,
cancellation, NOTIFY wakeups, graceful shutdown, batching and burst mode.

Handlers are exercised both as ``async def`` and as plain ``def`` (thread pool)
where the difference matters. Nothing is mocked; every assertion reads the
committed row.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

import wai
from tests.integration._helpers import (
    FAST,
    FLAVORS,
    Work,
    attempts_settled,
    count,
    db_now,
    fetch,
    register,
    serving,
    wait_for,
    wait_gate,
    wait_job,
)
from wai.maintenance import Rescuer
from wai.worker import RuntimeSettings, _finalizer

pytestmark = pytest.mark.timeout(60)


def error_at(entry: dict[str, Any]) -> datetime:
    """The ``at`` timestamp of an error entry (written by the finalizing transaction)."""
    return datetime.fromisoformat(entry["at"])


async def stays(client: wai.AsyncClient, job_id: int, state: str, seconds: float) -> wai.JobRow:
    """Assert the job stays in ``state`` for ``seconds`` (negative checks need a window)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    row = await client.get_job(job_id)
    while loop.time() < end:
        row = await client.get_job(job_id)
        assert row.state == state, f"job {job_id} left {state}: {row}"
        await asyncio.sleep(0.05)
    return row


# -- handler results ------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_returning_none_completes_and_clears_progress(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    seen: list[tuple[int, Any, int]] = []

    def body(job: wai.Job[Work]) -> None:
        seen.append((job.attempt, job.args, job.run_lease))
        job.set_progress(50, "half")
        job.update_metadata({"k": 1})

    register(aclient, flavor, body)
    async with serving(aclient):
        row = await aclient.insert(Work(n=3))
        assert row.queue == "q"
        done = await wait_job(aclient, row.id, "completed")

    assert seen == [(1, Work(n=3), 1)]
    assert done.finalized_at is not None
    assert done.finalized_at >= done.attempted_at  # type: ignore[operator]
    assert done.progress is None
    assert done.errors == ()
    assert done.attempt == 1
    assert done.run_lease == 1
    assert done.heartbeat_at is None
    assert done.deadline_at is None


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_retry_after_with_attempts_left_is_retried_then_rerun(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    attempts: list[int] = []

    def body(job: wai.Job[Work]) -> wai.RetryAfter | None:
        attempts.append(job.attempt)
        return wai.RetryAfter(1.0) if job.attempt == 1 else None

    register(aclient, flavor, body)
    async with serving(aclient):
        row = await aclient.insert(Work())
        retry = await wait_job(aclient, row.id, "retryable", timeout=3)
        assert retry.attempt == 1
        assert retry.finalized_at is None
        (entry,) = retry.errors
        assert entry["attempt"] == 1
        assert "RetryAfter" in entry["error"]
        assert "terminal" not in entry
        # run_at = the finalizing transaction's now() + 1 s, which also stamped the error.
        delay = (retry.run_at - error_at(entry)).total_seconds()
        assert delay == pytest.approx(1.0, abs=0.01)
        # promoted when due, claimed again, completed
        done = await wait_job(aclient, row.id, "completed", timeout=5)

    assert attempts == [1, 2]
    assert done.attempt == 2
    assert done.run_lease == 2
    assert len(done.errors) == 1
    assert done.attempted_at >= retry.run_at  # type: ignore[operator]


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_retry_after_at_last_attempt_fails(aclient: wai.AsyncClient, flavor: str) -> None:
    register(aclient, flavor, lambda job: wai.RetryAfter(0))
    async with serving(aclient):
        row = await aclient.insert(Work(), max_attempts=1)
        failed = await wait_job(aclient, row.id, "failed")

    assert failed.attempt == 1
    assert failed.finalized_at is not None
    (entry,) = failed.errors
    assert entry["attempt"] == 1
    assert "terminal" not in entry
    assert "RetryAfter" in entry["error"]


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_snooze_reschedules_without_consuming_an_attempt(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    attempts: list[int] = []

    def body(job: wai.Job[Work]) -> wai.Snooze | None:
        attempts.append(job.attempt)
        return wai.Snooze(0.8) if len(attempts) == 1 else None

    register(aclient, flavor, body)
    async with serving(aclient):
        row = await aclient.insert(Work())
        snoozed = await wait_job(aclient, row.id, "scheduled", timeout=3)
        now = await db_now(aclient)
        assert snoozed.attempt == 0  # the claim's +1 was given back
        assert snoozed.errors == ()
        assert snoozed.finalized_at is None
        assert 0 < (snoozed.run_at - now).total_seconds() <= 0.8
        done = await wait_job(aclient, row.id, "completed", timeout=5)

    assert attempts == [1, 1]
    assert done.attempt == 1
    assert done.errors == ()
    assert done.run_lease == 2  # two claims, one attempt


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_cancel_result_cancels_with_reason(aclient: wai.AsyncClient, flavor: str) -> None:
    register(aclient, flavor, lambda job: wai.Cancel("customer closed the account"))
    async with serving(aclient):
        row = await aclient.insert(Work())
        cancelled = await wait_job(aclient, row.id, "cancelled")

    assert cancelled.finalized_at is not None
    (entry,) = cancelled.errors
    assert "customer closed the account" in entry["error"]
    assert entry["attempt"] == 1
    assert cancelled.attempt == 1


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_exception_is_retried_with_backoff(aclient: wai.AsyncClient, flavor: str) -> None:
    def body(job: wai.Job[Work]) -> None:
        raise ValueError(f"boom on attempt {job.attempt}")

    register(aclient, flavor, body)
    async with serving(aclient):
        row = await aclient.insert(Work())
        retry = await wait_job(aclient, row.id, "retryable")
        now = await db_now(aclient)

    assert retry.attempt == 1
    assert retry.finalized_at is None
    (entry,) = retry.errors
    assert entry["attempt"] == 1
    assert entry["error"].startswith("ValueError: boom on attempt 1")
    assert "terminal" not in entry
    # backoff(1) is 2 s plus up to 25 % jitter
    delay = (retry.run_at - error_at(entry)).total_seconds()
    assert 2.0 <= delay <= 2.5 + 0.01
    assert retry.run_at > now


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_exception_at_max_attempts_fails(aclient: wai.AsyncClient, flavor: str) -> None:
    def body(job: wai.Job[Work]) -> None:
        raise RuntimeError("still broken")

    register(aclient, flavor, body)
    async with serving(aclient):
        row = await aclient.insert(Work(), max_attempts=1)
        failed = await wait_job(aclient, row.id, "failed")

    assert failed.attempt == 1
    assert failed.finalized_at is not None
    (entry,) = failed.errors
    assert entry["error"].startswith("RuntimeError: still broken")
    assert entry["attempt"] == 1
    assert "terminal" not in entry


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_terminal_error_fails_at_once(aclient: wai.AsyncClient, flavor: str) -> None:
    def body(job: wai.Job[Work]) -> None:
        raise wai.TerminalError("card permanently declined")

    register(aclient, flavor, body)
    async with serving(aclient):
        row = await aclient.insert(Work())
        failed = await wait_job(aclient, row.id, "failed")

    assert failed.attempt == 1
    assert failed.max_attempts == 25
    (entry,) = failed.errors
    assert entry["terminal"] is True
    assert "TerminalError: card permanently declined" in entry["error"]


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_unexpected_return_value_fails_clearly(aclient: wai.AsyncClient, flavor: str) -> None:
    register(aclient, flavor, lambda job: 42)
    async with serving(aclient):
        row = await aclient.insert(Work())
        failed = await wait_job(aclient, row.id, "failed")

    (entry,) = failed.errors
    assert "int" in entry["error"]
    assert "return None" in entry["error"]
    assert entry["terminal"] is True


async def test_unknown_kind_fails_and_the_worker_keeps_working(aclient: wai.AsyncClient) -> None:
    register(aclient, "async", lambda job: None)
    async with serving(aclient):
        bad = await aclient.insert({"x": 1}, kind="nobody", queue="q")
        failed = await wait_job(aclient, bad.id, "failed")
        good = await aclient.insert(Work(n=1))
        await wait_job(aclient, good.id, "completed")

    (entry,) = failed.errors
    assert "unknown job kind" in entry["error"]
    assert "nobody" in entry["error"]
    assert entry["terminal"] is True
    assert failed.attempt == 1


@dataclass
class Strict:
    """Args with a required field: ``{"wrong": 1}`` cannot decode into it."""

    count: int


async def test_undecodable_args_fail(aclient: wai.AsyncClient) -> None:
    ran: list[int] = []
    register(aclient, "async", lambda job: ran.append(job.id), Strict)
    async with serving(aclient):
        bad = await aclient.insert({"wrong": 1}, kind="strict")
        assert bad.queue == "q"  # the registered queue of the kind
        failed = await wait_job(aclient, bad.id, "failed")
        good = await aclient.insert(Strict(count=2))
        await wait_job(aclient, good.id, "completed")

    assert ran == [good.id]
    (entry,) = failed.errors
    assert "undecodable args" in entry["error"]
    assert "Strict" in entry["error"]
    assert entry["terminal"] is True


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_task_max_attempts_default_applies(aclient: wai.AsyncClient, flavor: str) -> None:
    def body(job: wai.Job[Work]) -> None:
        raise RuntimeError(f"fail {job.attempt}")

    register(aclient, flavor, body, max_attempts=2)
    assert (await aclient.insert(Work(), max_attempts=5)).max_attempts == 5  # explicit wins
    await fetch(aclient, "DELETE FROM wai.jobs")
    async with serving(aclient):
        row = await aclient.insert(Work())
        assert row.max_attempts == 2
        await wait_job(aclient, row.id, "retryable")
        # skip the 2 s backoff
        await fetch(aclient, "UPDATE wai.jobs SET run_at = now() WHERE id = %s", (row.id,))
        failed = await wait_job(aclient, row.id, "failed")

    assert failed.attempt == 2
    assert [e["attempt"] for e in failed.errors] == [1, 2]
    assert [e["error"].splitlines()[0] for e in failed.errors] == [
        "RuntimeError: fail 1",
        "RuntimeError: fail 2",
    ]


# -- per-attempt deadline -------------------------------------------------------------


async def test_async_deadline_cancels_the_attempt_and_retries(aclient: wai.AsyncClient) -> None:
    claimed: list[wai.JobRow] = []
    interrupted = threading.Event()

    @aclient.task(Work, queue="q", deadline=0.3)
    async def slow(job: wai.Job[Work]) -> None:
        claimed.append(job.row)
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            interrupted.set()
            raise

    async with serving(aclient):
        row = await aclient.insert(Work())
        started = time.monotonic()
        retry = await wait_job(aclient, row.id, "retryable", timeout=3)
        elapsed = time.monotonic() - started

    assert elapsed < 2.5
    assert interrupted.is_set()
    (claim,) = claimed
    assert claim.deadline_at is not None
    assert claim.attempted_at is not None
    assert (claim.deadline_at - claim.attempted_at).total_seconds() == pytest.approx(0.3, abs=0.01)
    (entry,) = retry.errors
    assert "deadline" in entry["error"]
    assert "TimeoutError" in entry["error"]
    assert entry["attempt"] == 1
    assert retry.deadline_at is None


async def test_sync_deadline_is_observed_and_the_late_result_is_ignored(
    aclient: wai.AsyncClient,
) -> None:
    observed = threading.Event()
    returned = threading.Event()

    @aclient.task(Work, queue="q", deadline=0.3)
    def slow(job: wai.Job[Work]) -> None:
        try:
            end = time.monotonic() + 5
            while time.monotonic() < end:
                if job.is_cancelled():
                    observed.set()
                    break
                time.sleep(0.01)
            time.sleep(0.3)  # finish well after the deadline outcome was written
        finally:
            returned.set()

    async with serving(aclient):
        row = await aclient.insert(Work())
        retry = await wait_job(aclient, row.id, "retryable", timeout=3)
        # keep it from being promoted and re-run while we watch
        await fetch(
            aclient,
            "UPDATE wai.jobs SET run_at = now() + interval '1 hour' WHERE id = %s",
            (row.id,),
        )
        await wait_for(observed.is_set, 2, what="is_cancelled() past the deadline")
        await wait_for(returned.is_set, 2, what="the handler thread to return")
        await wait_for(lambda: attempts_settled(aclient), 2)
        after = await stays(aclient, row.id, "retryable", 0.3)

    (entry,) = retry.errors
    assert "deadline" in entry["error"]
    assert after.errors == retry.errors
    assert after.attempt == 1
    assert after.finalized_at is None


@dataclass
class Patient:
    """A kind whose task deadline overrides its queue's."""

    n: int = 0


async def test_queue_deadline_applies_unless_the_task_sets_its_own(
    aclient: wai.AsyncClient,
) -> None:
    claims: dict[str, wai.JobRow] = {}

    @aclient.task(Work, queue="q")
    async def slow(job: wai.Job[Work]) -> None:
        claims["work"] = job.row
        await asyncio.sleep(5)

    @aclient.task(Patient, queue="q", deadline=5)
    async def patient(job: wai.Job[Patient]) -> None:
        claims["patient"] = job.row
        await asyncio.sleep(0.6)

    async with serving(aclient, {"q": wai.QueueConfig(concurrency=2, deadline=0.3)}):
        timed_out = await aclient.insert(Work())
        finished = await aclient.insert(Patient())
        retry = await wait_job(aclient, timed_out.id, "retryable", timeout=3)
        await wait_job(aclient, finished.id, "completed", timeout=3)

    assert retry.errors[0]["error"].splitlines()[0] == "TimeoutError: deadline of 0.3s exceeded"
    for kind, seconds in (("work", 0.3), ("patient", 5.0)):
        row = claims[kind]
        assert row.deadline_at is not None
        assert row.attempted_at is not None
        budget = (row.deadline_at - row.attempted_at).total_seconds()
        assert budget == pytest.approx(seconds, abs=0.01), kind


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_handler_timeout_error_is_not_mistaken_for_the_deadline(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    def body(job: wai.Job[Work]) -> None:
        raise TimeoutError("upstream API took too long")

    register(aclient, flavor, body, deadline=30)
    async with serving(aclient):
        row = await aclient.insert(Work())
        retry = await wait_job(aclient, row.id, "retryable")

    (entry,) = retry.errors
    first_line = entry["error"].splitlines()[0]
    assert first_line == "TimeoutError: upstream API took too long"
    assert "deadline" not in first_line


# -- progress -------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_flush_progress_persists_while_running(aclient: wai.AsyncClient, flavor: str) -> None:
    gate = threading.Event()
    flushed: list[bool] = []

    if flavor == "async":

        @aclient.task(Work, queue="q")
        async def handler(job: wai.Job[Work]) -> None:
            job.set_progress(40, "half way")
            job.update_metadata({"cursor": 7})
            flushed.append(await job.flush_progress())
            await wait_gate(gate)

    else:

        @aclient.task(Work, queue="q")
        def sync_handler(job: wai.Job[Work]) -> None:
            job.set_progress(40, "half way")
            job.update_metadata({"cursor": 7})
            flushed.append(job.flush_progress_sync())
            gate.wait(10)

    try:
        # heartbeats every 5 s: only the explicit flush can write the progress in time
        async with serving(aclient, heartbeat_interval=5, heartbeat_staleness=15):
            row = await aclient.insert(Work())
            mid = await wait_job(aclient, row.id, lambda r: r.progress is not None, timeout=2)
            assert mid.state == "running"
            assert mid.progress == {"percent": 40, "message": "half way", "metadata": {"cursor": 7}}
            # the row can show the progress before the handler (a thread, for sync) has
            # stored what the flush returned
            await wait_for(lambda: flushed, 2, what="the flush's result")
            assert flushed == [True]
            gate.set()
            done = await wait_job(aclient, row.id, "completed")
    finally:
        gate.set()
    assert done.progress is None


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_heartbeat_persists_progress(aclient: wai.AsyncClient, flavor: str) -> None:
    step1, step2 = threading.Event(), threading.Event()

    if flavor == "async":

        @aclient.task(Work, queue="q")
        async def handler(job: wai.Job[Work]) -> None:
            job.set_progress(10)
            await wait_gate(step1)
            job.set_progress(60, "more")
            job.update_metadata({"rows": 600})
            await wait_gate(step2)

    else:

        @aclient.task(Work, queue="q")
        def sync_handler(job: wai.Job[Work]) -> None:
            job.set_progress(10)
            step1.wait(10)
            job.set_progress(60, "more")
            job.update_metadata({"rows": 600})
            step2.wait(10)

    try:
        async with serving(aclient):
            row = await aclient.insert(Work())
            first = await wait_job(aclient, row.id, lambda r: r.progress is not None)
            assert first.progress == {"percent": 10, "message": None, "metadata": {}}
            step1.set()
            second = await wait_job(
                aclient, row.id, lambda r: (r.progress or {}).get("percent") == 60
            )
            assert second.state == "running"
            assert second.progress == {"percent": 60, "message": "more", "metadata": {"rows": 600}}
            step2.set()
            done = await wait_job(aclient, row.id, "completed")
    finally:
        step1.set()
        step2.set()
    assert done.progress is None


@pytest.mark.parametrize("how", ["retry_after", "raise"])
@pytest.mark.parametrize("flavor", FLAVORS)
async def test_progress_is_kept_across_a_retry(
    aclient: wai.AsyncClient, flavor: str, how: str
) -> None:
    seen: list[dict[str, Any] | None] = []

    def body(job: wai.Job[Work]) -> wai.RetryAfter | None:
        seen.append(job.progress)
        if job.attempt == 1:
            job.set_progress(50, "first pass")
            job.update_metadata({"cursor": 500})
            if how == "raise":
                raise ConnectionError("lost the upstream")
            return wai.RetryAfter(0.5)
        job.update_metadata({"cursor": 1000})
        return None

    expected = {"percent": 50, "message": "first pass", "metadata": {"cursor": 500}}
    register(aclient, flavor, body)
    async with serving(aclient):
        row = await aclient.insert(Work())
        retry = await wait_job(aclient, row.id, "retryable", timeout=3)
        assert retry.progress == expected
        await fetch(aclient, "UPDATE wai.jobs SET run_at = now() WHERE id = %s", (row.id,))
        done = await wait_job(aclient, row.id, "completed")

    assert seen == [None, expected]
    assert done.progress is None


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_progress_postgresql_cannot_store_is_refused_at_the_call(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    gate = threading.Event()
    refused: list[str] = []
    kept: list[dict[str, Any] | None] = []
    bad_calls: list[Callable[[wai.Job[Work]], None]] = [
        lambda job: job.set_progress(50, "a\x00b"),
        lambda job: job.set_progress(50, "\ud800"),
        lambda job: job.set_progress(float("nan")),
        lambda job: job.set_progress(float("inf")),
        lambda job: job.set_progress(101),
        lambda job: job.set_progress("50"),  # type: ignore[arg-type]
        lambda job: job.update_metadata({"a": ["x\x00"]}),
        lambda job: job.update_metadata({"k\x00": 1}),
        lambda job: job.update_metadata({"n": {"deep": float("nan")}}),
        lambda job: job.update_metadata({"s": "\udfff"}),
    ]

    def body(job: wai.Job[Work]) -> None:
        job.set_progress(10, "fine")
        for call in bad_calls:
            try:
                call(job)
            except wai.ValidationError as exc:
                refused.append(str(exc))
        kept.append(job.progress)

    if flavor == "async":

        @aclient.task(Work, queue="q")
        async def handler(job: wai.Job[Work]) -> None:
            body(job)
            await wait_gate(gate)

    else:

        @aclient.task(Work, queue="q")
        def sync_handler(job: wai.Job[Work]) -> None:
            body(job)
            gate.wait(10)

    try:
        async with serving(aclient):
            row = await aclient.insert(Work())
            first = await wait_job(aclient, row.id, lambda r: r.heartbeat_at is not None)
            # heartbeats go on, carrying the progress recorded before the refused calls
            later = await wait_job(
                aclient,
                row.id,
                lambda r: r.progress is not None and r.heartbeat_at > first.heartbeat_at,  # type: ignore[operator]
            )
            assert later.progress == {"percent": 10, "message": "fine", "metadata": {}}
            gate.set()
            await wait_job(aclient, row.id, "completed")
    finally:
        gate.set()
    assert kept == [{"percent": 10, "message": "fine", "metadata": {}}]
    assert refused == [
        "progress message: contains a NUL byte, which PostgreSQL cannot store",
        "progress message: contains a lone surrogate '\\ud800', which is not valid UTF-8",
        "progress percent: must be between 0 and 100, got nan",
        "progress percent: must be between 0 and 100, got inf",
        "progress percent: must be between 0 and 100, got 101",
        "progress percent: must be a number, got '50'",
        "progress metadata['a'][0]: contains a NUL byte, which PostgreSQL cannot store",
        "progress metadata key 'k\\x00': contains a NUL byte, which PostgreSQL cannot store",
        "progress metadata cannot be encoded as JSON: Out of range float values are not JSON"
        " compliant",
        "progress metadata['s']: contains a lone surrogate '\\udfff', which is not valid UTF-8",
    ]


# -- heartbeats -----------------------------------------------------------------------


async def test_cpu_bound_sync_handler_keeps_heartbeating(aclient: wai.AsyncClient) -> None:
    @aclient.task(Work, queue="q")
    def busy(job: wai.Job[Work]) -> None:
        end = time.monotonic() + 1.5
        x = 0
        while time.monotonic() < end:
            x += 1

    beats: list[datetime] = []
    async with serving(aclient):
        row = await aclient.insert(Work())
        while True:
            current = await aclient.get_job(row.id)
            if current.state != "running":
                if current.state == "available":
                    await asyncio.sleep(0.02)
                    continue
                break
            assert current.heartbeat_at is not None
            if not beats or current.heartbeat_at != beats[-1]:
                beats.append(current.heartbeat_at)
            await asyncio.sleep(0.05)
        done = await wait_job(aclient, row.id, "completed")

    assert done.attempt == 1
    assert len(beats) >= 3, beats  # the claim's heartbeat and at least two refreshes
    assert beats == sorted(beats)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(beats)]
    assert max(gaps) < FAST["heartbeat_staleness"], gaps


@dataclass
class Shipped:
    """The follow-up of a completed ``Work`` job in the tests below."""

    n: int


def hold_finalizer(monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, list[int]]:
    """Make the finalizer wait for the returned event before each write it starts (a
    finalizer stuck on a slow or partitioned database), on a connection that holds no
    lock. Returns the event and the sizes of the batches held so far."""
    release = asyncio.Event()
    held: list[int] = []
    apply = _finalizer.apply_outcomes

    async def held_apply(
        conn: Any, schema: str, registry: Any, outcomes: Any, **kwargs: Any
    ) -> Any:
        held.append(len(outcomes))
        await release.wait()
        return await apply(conn, schema, registry, outcomes, **kwargs)

    monkeypatch.setattr(_finalizer, "apply_outcomes", held_apply)
    return release, held


async def test_finished_attempt_keeps_heartbeating_until_its_outcome_is_written(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, held = hold_finalizer(monkeypatch)
    register(aclient, "async", lambda job: job.set_progress(70, "done soon"), deadline=1)
    aclient.on_completed_enqueue(Work, lambda args, job: Shipped(n=args.n))
    aclient.on_rescued_enqueue(Work, lambda args, job, reason: Shipped(n=-1))
    rescuer = Rescuer(aclient.pool, aclient.schema, interval=60, staleness=1.0, deadline_grace=0.2)
    try:
        async with serving(aclient, maintenance=False, heartbeat_staleness=1.0):
            row = await aclient.insert(Work(n=5))
            await wait_for(lambda: held, 5, what="the finalizer to hold the outcome")
            claimed = await aclient.get_job(row.id)
            assert claimed.deadline_at is not None
            # watch well past the staleness and the 1 s deadline (plus its grace)
            beats: list[datetime] = []
            loop = asyncio.get_running_loop()
            end = loop.time() + 2.2
            while loop.time() < end:
                current = await aclient.get_job(row.id)
                assert current.state == "running"
                assert current.heartbeat_at is not None
                if not beats or current.heartbeat_at != beats[-1]:
                    beats.append(current.heartbeat_at)
                await asyncio.sleep(0.05)
            assert len(beats) >= 4, beats  # the claim's heartbeat, then refreshes
            gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(beats)]
            assert max(gaps) < 1.0, gaps
            assert (await aclient.get_job(row.id)).deadline_at is None
            assert (await aclient.get_job(row.id)).progress is None  # no heartbeat wrote it
            assert (await rescuer.run_once()).rescued == {}
            release.set()
            done = await wait_job(aclient, row.id, "completed")
    finally:
        release.set()
    assert done.errors == ()
    followups = await fetch(
        aclient,
        "SELECT args->>'n', trigger_outcome FROM wai.jobs WHERE trigger_job_id = %s",
        (row.id,),
    )
    assert followups == [("5", "completed")]
    assert await count(aclient, "kind = 'shipped'") == 1
    assert (await fetch(aclient, "SELECT count(*) FROM wai.outbox"))[0][0] == 0


async def test_finished_heartbeat_skips_a_locked_row_and_waits_on_nothing(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, held = hold_finalizer(monkeypatch)
    register(aclient, "async", lambda job: None)
    try:
        async with serving(aclient, maintenance=False):
            locked, free = await aclient.insert(Work(n=1)), await aclient.insert(Work(n=2))
            await wait_for(lambda: sum(held) == 2, 5, what="both outcomes held")
            async with aclient._connection() as other, other.transaction():
                await other.execute("SELECT 1 FROM wai.jobs WHERE id = %s FOR UPDATE", (locked.id,))
                frozen = (await aclient.get_job(locked.id)).heartbeat_at
                mark = (await aclient.get_job(free.id)).heartbeat_at
                assert mark is not None
                for _ in range(2):  # two heartbeat passes went by the locked row
                    moved = await wait_job(
                        aclient,
                        free.id,
                        lambda r, m=mark: r.heartbeat_at > m,  # type: ignore[misc,operator]
                        timeout=2,
                    )
                    mark = moved.heartbeat_at
                assert (await aclient.get_job(locked.id)).heartbeat_at == frozen
            release.set()
            for row in (locked, free):
                await wait_job(aclient, row.id, "completed")
    finally:
        release.set()


# -- cancellation behind the worker's back ----------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_is_cancelled_flips_when_the_row_is_cancelled_elsewhere(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    flipped = threading.Event()
    returned = threading.Event()

    if flavor == "async":

        @aclient.task(Work, queue="q")
        async def handler(job: wai.Job[Work]) -> None:
            try:
                for _ in range(500):
                    if job.is_cancelled():
                        flipped.set()
                        break
                    await asyncio.sleep(0.01)
            finally:
                returned.set()

    else:

        @aclient.task(Work, queue="q")
        def sync_handler(job: wai.Job[Work]) -> None:
            try:
                for _ in range(500):
                    if job.is_cancelled():
                        flipped.set()
                        break
                    time.sleep(0.01)
            finally:
                returned.set()

    async with serving(aclient):
        row = await aclient.insert(Work())
        await wait_job(aclient, row.id, "running")
        await fetch(
            aclient,
            "UPDATE wai.jobs SET state = 'cancelled', finalized_at = now(),"
            ' errors = errors || \'[{"error": "cancelled by operator"}]\'::jsonb'
            " WHERE id = %s",
            (row.id,),
        )
        cancelled = await aclient.get_job(row.id)
        await wait_for(flipped.is_set, 2, what="is_cancelled() to flip")
        await wait_for(returned.is_set, 2)
        await wait_for(lambda: attempts_settled(aclient), 2)
        after = await aclient.get_job(row.id)

    assert after == cancelled  # the late "completed" was fenced off


# -- NOTIFY ---------------------------------------------------------------------------


async def test_notify_wakes_an_idle_worker(aclient: wai.AsyncClient) -> None:
    register(aclient, "async", lambda job: None)
    async with serving(aclient, poll_interval=30):
        runtime = aclient._runtime  # pyright: ignore[reportPrivateUsage]
        assert runtime is not None
        producer = runtime.producers["q"]
        await wait_for(lambda: producer.claims >= 1)  # the first (empty) claim is behind us
        await asyncio.sleep(0.1)
        claims = producer.claims
        row = await aclient.insert(Work())
        # polling every 30 s cannot explain a pickup within 5 s: only NOTIFY can
        await wait_job(aclient, row.id, "completed", timeout=5)
        assert producer.claims > claims


# -- concurrency ----------------------------------------------------------------------


async def test_concurrency_limit_is_respected(aclient: wai.AsyncClient) -> None:
    gate = threading.Event()
    active = 0
    peak = 0

    @aclient.task(Work, queue="q")
    async def handler(job: wai.Job[Work]) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            await wait_gate(gate)
        finally:
            active -= 1

    try:
        async with serving(aclient, {"q": 3}):
            await aclient.insert_many([Work(n=i) for i in range(8)])
            await wait_for(lambda: count(aclient, "state = 'running'"), 3)
            await wait_for(lambda: active == 3)
            await asyncio.sleep(0.3)  # give an over-eager producer the chance to claim more
            assert await count(aclient, "state = 'running'") == 3
            assert await count(aclient, "state = 'available'") == 5
            gate.set()

            async def all_done() -> bool:
                return await count(aclient, "state = 'completed'") == 8

            await wait_for(all_done, 5)
    finally:
        gate.set()
    assert peak == 3


# -- graceful shutdown ----------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_shutdown_lets_a_cooperative_handler_finish(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    if flavor == "async":

        @aclient.task(Work, queue="q")
        async def handler(job: wai.Job[Work]) -> None:
            while not job.is_cancelled():  # noqa: ASYNC110 - polling is the API under test
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)  # some cleanup

    else:

        @aclient.task(Work, queue="q")
        def sync_handler(job: wai.Job[Work]) -> None:
            end = time.monotonic() + 10
            while not job.is_cancelled() and time.monotonic() < end:
                time.sleep(0.01)
            time.sleep(0.1)

    async with serving(aclient):
        row = await aclient.insert(Work())
        await wait_job(aclient, row.id, "running")
        started = time.monotonic()
        await aclient.shutdown(timeout=5)
        elapsed = time.monotonic() - started

    assert elapsed < 2.5
    done = await aclient.get_job(row.id)
    assert done.state == "completed"
    assert done.errors == ()


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_shutdown_timeout_cancels_a_stubborn_handler_and_refunds_the_attempt(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    release = threading.Event()
    if flavor == "async":

        @aclient.task(Work, queue="q")
        async def handler(job: wai.Job[Work]) -> None:
            await asyncio.sleep(30)

    else:

        @aclient.task(Work, queue="q")
        def sync_handler(job: wai.Job[Work]) -> None:
            release.wait(10)  # ignores is_cancelled()

    try:
        async with serving(aclient):
            row = await aclient.insert(Work())
            running = await wait_job(aclient, row.id, "running")
            started = time.monotonic()
            await aclient.shutdown(timeout=0.5)
            elapsed = time.monotonic() - started
    finally:
        release.set()

    assert 0.4 <= elapsed < 3
    back = await aclient.get_job(row.id)
    assert back.state == "available"
    assert back.attempt == 0  # refunded
    assert back.run_lease == running.run_lease
    assert back.heartbeat_at is None
    assert back.finalized_at is None
    (entry,) = back.errors
    assert "shut down" in entry["error"]
    assert await count(aclient, "state = 'running'") == 0


async def test_no_job_is_left_running_after_shutdown(aclient: wai.AsyncClient) -> None:
    @aclient.task(Work, queue="q")
    async def handler(job: wai.Job[Work]) -> None:
        await asyncio.sleep(0.2 + 0.1 * (job.args.n % 3))

    async with serving(aclient, {"q": 4}):
        await aclient.insert_many([Work(n=i) for i in range(16)])
        await wait_for(lambda: count(aclient, "state = 'running'"), 3)
        await aclient.shutdown(timeout=0.25)

    assert await count(aclient, "state = 'running'") == 0
    done = await count(aclient, "state = 'completed'")
    back = await count(aclient, "state = 'available'")
    assert done + back == 16
    assert await count(aclient, "state = 'available' AND attempt <> 0") == 0


# -- batching -------------------------------------------------------------------------


async def test_outcomes_are_finalized_in_batches(aclient: wai.AsyncClient) -> None:
    @aclient.task(Work, queue="bulk")
    async def noop(job: wai.Job[Work]) -> None:
        return None

    jobs = 2000
    await aclient.insert_many([Work(n=i) for i in range(jobs)])

    async def all_done() -> bool:
        return await count(aclient, "state = 'completed'") == jobs

    async with serving(aclient, {"bulk": 32}):
        await wait_for(all_done, 60, interval=0.1)
        runtime = aclient._runtime  # pyright: ignore[reportPrivateUsage]
        assert runtime is not None
        finalizer = runtime._finalizer  # pyright: ignore[reportPrivateUsage]
        assert finalizer is not None
        transactions = finalizer.transactions

    assert transactions < jobs / 4, transactions
    assert await count(aclient, "state <> 'completed'") == 0


# -- burst mode -----------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_burst_mode_returns_once_the_queue_is_empty(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    register(aclient, flavor, lambda job: None)
    await aclient.insert_many([Work(n=i) for i in range(50)])
    await asyncio.wait_for(aclient.run({"q": 4}, burst=True, **FAST), 20)

    assert await count(aclient, "state = 'completed'") == 50
    runtime = aclient._runtime  # pyright: ignore[reportPrivateUsage]
    assert runtime is not None
    assert runtime.stopped


async def test_burst_mode_on_an_empty_queue_returns_at_once(aclient: wai.AsyncClient) -> None:
    """An empty queue ends a burst without waiting for a poll: with a poll interval of
    ten minutes, the run still returns (well within the test's generous timeout)."""
    register(aclient, "async", lambda job: None)
    slow_polls = {**FAST, "poll_interval": 600.0}
    await asyncio.wait_for(aclient.run({"q": 4}, burst=True, **slow_polls), 60)


# -- both clients ---------------------------------------------------------------------


async def test_jobs_inserted_by_the_sync_client_are_processed(
    aclient: wai.AsyncClient, sclient: wai.Client
) -> None:
    seen: list[int] = []
    register(aclient, "async", lambda job: seen.append(job.args.n))
    async with serving(aclient):
        one = sclient.insert(Work(n=1), queue="q")
        many = sclient.insert_many([wai.EnqueueRequest(Work(n=i), queue="q") for i in range(2, 6)])
        for row in [one, *many]:
            await wait_job(aclient, row.id, "completed")

    assert sorted(seen) == [1, 2, 3, 4, 5]
    assert sclient.get_job(one.id).state == "completed"


# -- a worker with nothing to do ------------------------------------------------------


async def test_start_twice_is_rejected_but_restart_after_shutdown_works(
    aclient: wai.AsyncClient,
) -> None:
    register(aclient, "async", lambda job: None)
    async with serving(aclient):
        with pytest.raises(wai.ValidationError):
            await aclient.start({"q": 1}, **FAST)
        first = await aclient.insert(Work(n=1))
        await wait_job(aclient, first.id, "completed")
    async with serving(aclient):
        second = await aclient.insert(Work(n=2))
        await wait_job(aclient, second.id, "completed")


async def test_start_on_an_unmigrated_database_fails_cleanly(empty_database_url: str) -> None:
    client = wai.AsyncClient(empty_database_url)
    register(client, "async", lambda job: None)
    async with client:
        with pytest.raises(wai.SchemaNotMigrated):
            await client.start({"q": 1}, **FAST)
        await client.shutdown(timeout=1)  # nothing to stop, and no error
        await client.migrate()
        async with serving(client):  # a failed start does not block a later one
            row = await client.insert(Work())
            await wait_job(client, row.id, "completed")


async def test_a_retried_job_runs_again_after_promotion_from_scheduled_run_at(
    aclient: wai.AsyncClient,
) -> None:
    """Jobs inserted with a run_at in the past are promoted at once and run."""
    register(aclient, "async", lambda job: None)
    async with serving(aclient):
        past = (await db_now(aclient)) - timedelta(seconds=5)
        row = await aclient.insert(Work(), run_at=past)
        assert row.state == "scheduled"
        await wait_job(aclient, row.id, "completed")


def test_heartbeat_staleness_of_exactly_three_intervals_is_accepted() -> None:
    # 3 * 0.2 == 0.6000000000000001 in floating point: 0.6 must still be allowed
    RuntimeSettings(heartbeat_interval=0.2, heartbeat_staleness=0.6)
    RuntimeSettings(heartbeat_interval=0.1, heartbeat_staleness=0.3)
    with pytest.raises(wai.ValidationError, match="3 x heartbeat_interval"):
        RuntimeSettings(heartbeat_interval=0.2, heartbeat_staleness=0.59)
