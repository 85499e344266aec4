"""Operator actions on both clients against a real PostgreSQL: cancel, retry, pause,
resume, drain and queue statistics, with a live worker where it matters.

The ``admin`` fixture runs each action through the async client or, in a thread,
through the sync client, so every test covers both. Rows are forced into states
with plain SQL, as a worker or maintenance would have left them.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, LiteralString

import psycopg
import pytest
from psycopg import sql

import wai
from tests.factories import HOSTILE
from tests.integration._helpers import (
    FLAVORS,
    Admin,
    Work,
    attempts_settled,
    count,
    db_now,
    fetch,
    register,
    serving,
    wait_for,
    wait_job,
)
from wai.maintenance import OutboxSweeper

pytestmark = pytest.mark.timeout(60)


STATES = [s.value for s in wai.JobState]
WAITING = ["scheduled", "available", "retryable", "waiting_external"]

_OLD_ERROR = '[{"error": "boom", "attempt": 1, "at": "2024-01-01T00:00:00+00:00"}]'

#: SET clauses that leave a job as the worker or maintenance would in each state.
_FORCE: dict[str, LiteralString] = {
    "scheduled": "state = 'scheduled', run_at = now() + interval '1 hour'",
    "available": "state = 'available'",
    "running": "state = 'running', attempt = 1, run_lease = 1, attempted_at = now(),"
    " heartbeat_at = now(), deadline_at = now() + interval '1 hour'",
    "retryable": "state = 'retryable', attempt = 1, run_lease = 1, attempted_at = now(),"
    " run_at = now() + interval '1 hour', errors = '" + _OLD_ERROR + "'",
    "waiting_external": "state = 'waiting_external', attempt = 1, run_lease = 1,"
    " attempted_at = now(), callback_id = gen_random_uuid(),"
    " callback_timeout_at = now() + interval '1 hour'",
    "completed": "state = 'completed', attempt = 1, run_lease = 1, attempted_at = now(),"
    " finalized_at = now()",
    "failed": "state = 'failed', attempt = 3, max_attempts = 3, run_lease = 3,"
    " attempted_at = now(), finalized_at = now(), errors = '" + _OLD_ERROR + "'",
    "cancelled": "state = 'cancelled', attempt = 1, run_lease = 1, finalized_at = now()",
}


async def make(client: wai.AsyncClient, state: str, *, queue: str = "q") -> wai.JobRow:
    """Insert a job into ``queue`` and force it into ``state``."""
    row = await client.insert(Work(), queue=queue)
    await fetch(client, "UPDATE wai.jobs SET " + _FORCE[state] + " WHERE id = %s", (row.id,))
    return await client.get_job(row.id)


async def keyed(client: wai.AsyncClient, *, queue: str = "q") -> list[wai.JobRow]:
    """Four jobs with ordering keys as a claim leaves them: the first of ``account-7``
    running (its key's turn taken), two more of that key waiting their turn, and one of
    ``account-8`` free to start. Keys running 1, waiting turn 2."""
    rows = [
        await client.insert(Work(n=n), queue=queue, ordering_key=key)
        for n, key in enumerate(("account-7", "account-7", "account-7", "account-8"))
    ]
    await fetch(client, "UPDATE wai.jobs SET " + _FORCE["running"] + " WHERE id = %s",
                (rows[0].id,))  # fmt: skip
    await fetch(
        client,
        "INSERT INTO wai.key_turns (queue, ordering_key, job_id) VALUES (%s, 'account-7', %s)",
        (queue, rows[0].id),
    )
    return rows


async def listening(client: wai.AsyncClient, channel: str) -> psycopg.AsyncConnection[Any]:
    """A connection of its own that LISTENs on ``channel`` (close it when done)."""
    conn = await psycopg.AsyncConnection.connect(client.database_url, autocommit=True)
    await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
    return conn


async def received(conn: psycopg.AsyncConnection[Any], timeout: float = 0.5) -> list[str]:
    """Payloads that arrived on ``conn`` within ``timeout`` seconds."""
    return [n.payload async for n in conn.notifies(timeout=timeout)]


async def queues_rows(client: wai.AsyncClient) -> list[tuple[Any, ...]]:
    """Every row of ``wai.queues`` as (name, paused, paused_at)."""
    return await fetch(client, "SELECT name, paused, paused_at FROM wai.queues ORDER BY name")


# -- cancel -----------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["scheduled", "available", "retryable"])
async def test_cancel_a_waiting_job(aclient: wai.AsyncClient, admin: Admin, state: str) -> None:
    before = await make(aclient, state)
    listener = await listening(aclient, "wai.cancel")
    try:
        row = await admin("cancel", before.id)
        assert await received(listener, 0.3) == []  # no worker holds a waiting job
    finally:
        await listener.close()

    assert row == await aclient.get_job(before.id)
    assert row.state == wai.JobState.CANCELLED
    assert row.finalized_at is not None
    assert (row.heartbeat_at, row.deadline_at, row.callback_id) == (None, None, None)
    assert (row.attempt, row.args) == (before.attempt, before.args)
    assert row.run_lease == before.run_lease + 1  # a cancel is a lease of its own
    assert row.errors[:-1] == before.errors  # history kept, one entry added
    entry = row.errors[-1]
    assert entry["error"] == "cancelled by operator"
    assert entry["attempt"] == before.attempt
    assert datetime.fromisoformat(entry["at"]) == row.finalized_at


@pytest.mark.parametrize("state", ["running", "waiting_external"])
async def test_cancel_a_live_attempt_notifies_its_worker(
    aclient: wai.AsyncClient, admin: Admin, state: str
) -> None:
    before = await make(aclient, state)
    listener = await listening(aclient, "wai.cancel")
    try:
        row = await admin("cancel", before.id)
        payloads = await received(listener)
    finally:
        await listener.close()

    assert row.state == wai.JobState.CANCELLED
    assert (row.heartbeat_at, row.deadline_at) == (None, None)
    assert (row.callback_id, row.callback_timeout_at) == (None, None)
    assert row.errors[-1]["attempt"] == 1
    assert row.run_lease == 2
    # the worker is told with the lease of the attempt it runs
    assert [json.loads(p) for p in payloads] == [{"job_id": before.id, "run_lease": 1}]


@pytest.mark.parametrize("state", ["completed", "failed", "cancelled"])
async def test_cancel_a_finished_job_is_rejected(
    aclient: wai.AsyncClient, admin: Admin, state: str
) -> None:
    before = await make(aclient, state)
    with pytest.raises(
        wai.InvalidStateError, match=f"cannot cancel job {before.id}: it is {state}"
    ):
        await admin("cancel", before.id)
    assert await aclient.get_job(before.id) == before


@pytest.mark.parametrize("handler_flavor", FLAVORS)
async def test_cancel_of_a_running_job_reaches_the_handler_and_fences_its_result(
    aclient: wai.AsyncClient, admin: Admin, handler_flavor: str
) -> None:
    started = threading.Event()
    flipped_at: list[float] = []

    def handler(job: wai.Job[Work]) -> None:
        started.set()
        end = time.monotonic() + 15
        while time.monotonic() < end:
            if job.is_cancelled():
                flipped_at.append(time.monotonic())
                return  # a "completed" outcome, which must be fenced off
            time.sleep(0.01)

    if handler_flavor == "async":

        @aclient.task(Work, queue="q")
        async def async_handler(job: wai.Job[Work]) -> None:
            started.set()
            end = time.monotonic() + 15
            while time.monotonic() < end:
                if job.is_cancelled():
                    flipped_at.append(time.monotonic())
                    return
                await asyncio.sleep(0.01)

    else:
        aclient.task(Work, queue="q")(handler)

    # Heartbeats every 5 s: only the NOTIFY can flip is_cancelled() within 2 s.
    async with serving(aclient, heartbeat_interval=5, heartbeat_staleness=15):
        job = await aclient.insert(Work())
        await wait_for(started.is_set, 5, what="the handler to start")
        cancelled = await admin("cancel", job.id)
        sent = time.monotonic()
        await wait_for(lambda: flipped_at, 2, what="is_cancelled() to flip via NOTIFY")
        assert flipped_at[0] - sent < 2
        await wait_for(lambda: attempts_settled(aclient), 5, what="the late outcome")
        after = await aclient.get_job(job.id)

    assert cancelled.state == wai.JobState.CANCELLED
    assert after == cancelled  # the handler's late "completed" changed nothing


async def test_a_malformed_cancel_notification_does_not_break_the_worker(
    aclient: wai.AsyncClient,
) -> None:
    register(aclient, "async", lambda job: None)
    async with serving(aclient, poll_interval=30):
        for payload in ("garbage", "[]", '{"job_id": "1", "run_lease": 1}', '{"job_id": 1}'):
            await fetch(aclient, "SELECT pg_notify('wai.cancel', %s)", (payload,))
        await asyncio.sleep(0.2)
        row = await aclient.insert(Work())
        # polling every 30 s cannot explain this: the LISTEN connection is still up
        await wait_job(aclient, row.id, "completed", timeout=5)


async def outbox(client: wai.AsyncClient) -> list[tuple[Any, ...]]:
    """Every outbox row as (job_id, run_lease, outcome, detail), by job id."""
    return await fetch(
        client, "SELECT job_id, run_lease, outcome, detail FROM wai.outbox ORDER BY job_id"
    )


async def test_cancel_leaves_the_outbox_row_of_its_followups(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    running = await make(aclient, "running")
    finished = await make(aclient, "completed")
    await admin("cancel", running.id)
    with pytest.raises(wai.InvalidStateError):
        await admin("cancel", finished.id)
    assert await outbox(aclient) == [
        (running.id, 2, "cancelled", {"reason": "cancelled by operator"})
    ]


@dataclass
class Refund:
    """The follow-up of a cancelled ``Work`` job."""

    n: int


async def test_admin_cancel_enqueues_the_cancelled_followups(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    reasons: list[str] = []

    @aclient.on_cancelled_enqueue(Work, name="refund")
    def refund(args: Work, job: wai.JobRow, reason: str) -> Refund:
        reasons.append(reason)
        return Refund(n=args.n)

    register(aclient, "async", lambda job: None, Refund, queue="refunds")
    job = await aclient.insert(
        Work(n=7), queue="q", run_at=await db_now(aclient) + timedelta(hours=1)
    )
    async with serving(aclient, {"refunds": 1}, outbox_interval=0.05):
        cancelled = await admin("cancel", job.id)

        async def followups() -> list[wai.JobRow]:
            return await aclient.list_jobs(trigger_job_id=job.id)

        (followup,) = await wait_for(followups, 5, what="the Cancelled follow-up")
        await wait_job(aclient, followup.id, "completed")
    assert followup.kind == "refund"
    assert followup.args == {"n": 7}
    assert followup.trigger == wai.Trigger(
        job_id=job.id, run_lease=cancelled.run_lease, outcome="cancelled", spec="refund"
    )
    assert reasons == ["cancelled by operator"]
    assert await outbox(aclient) == []  # dispatched exactly once


@pytest.mark.parametrize("dispatched_between", [True, False], ids=["swept", "pending"])
async def test_each_of_two_cancels_gets_its_followup(
    aclient: wai.AsyncClient, admin: Admin, dispatched_between: bool
) -> None:
    """cancel → retry → cancel: two committed cancels, two follow-ups.

    ``swept``: a process with the registry dispatched the first cancel's outbox row
    before the second cancel (its lineage must not swallow the second). ``pending``:
    the first row still waits in the outbox when the second cancel writes its own.
    """

    @aclient.on_cancelled_enqueue(Work, name="refund")
    def refund(args: Work, job: wai.JobRow, reason: str) -> Refund:
        return Refund(n=args.n)

    sweeper = OutboxSweeper(aclient.pool, aclient.schema, aclient.registry, interval=60)
    job = await aclient.insert(
        Work(n=3), queue="q", run_at=await db_now(aclient) + timedelta(hours=1)
    )
    first = await admin("cancel", job.id)
    if dispatched_between:
        assert (await sweeper.run_once()).dispatched == 1
    await admin("retry", job.id)
    second = await admin("cancel", job.id)
    await sweeper.run_once()

    followups = await aclient.list_jobs(trigger_job_id=job.id)
    triggers = sorted((f.trigger.run_lease, f.trigger.outcome) for f in followups if f.trigger)
    assert triggers == [(first.run_lease, "cancelled"), (second.run_lease, "cancelled")]
    assert first.run_lease < second.run_lease
    assert [f.args for f in followups] == [{"n": 3}, {"n": 3}]
    assert await outbox(aclient) == []


# -- retry ------------------------------------------------------------------------------


@pytest.mark.parametrize("state", ["failed", "cancelled", "waiting_external"])
async def test_retry_makes_the_job_available_now_keeping_its_attempts(
    aclient: wai.AsyncClient, admin: Admin, state: str
) -> None:
    before = await make(aclient, state)
    jobs = await listening(aclient, "wai.jobs")
    cancels = await listening(aclient, "wai.cancel")
    try:
        start = await db_now(aclient)
        row = await admin("retry", before.id)
        woken = await received(jobs)
        stopped = await received(cancels, 0.2)
    finally:
        await jobs.close()
        await cancels.close()

    assert row == await aclient.get_job(before.id)
    assert row.state == wai.JobState.AVAILABLE
    assert row.attempt == before.attempt  # kept: max_attempts still bounds the job
    assert start <= row.run_at <= await db_now(aclient)
    assert (row.finalized_at, row.heartbeat_at, row.deadline_at) == (None, None, None)
    assert (row.callback_id, row.callback_timeout_at) == (None, None)
    assert row.errors == before.errors  # history kept
    assert row.run_lease == before.run_lease + 1
    # an exhausted job (failed at 3 of 3) gets exactly one more attempt
    assert row.max_attempts == (4 if state == "failed" else before.max_attempts)
    assert woken == ["q"]
    expected = [{"job_id": before.id, "run_lease": 1}] if state == "waiting_external" else []
    assert [json.loads(p) for p in stopped] == expected


@pytest.mark.parametrize("state", ["scheduled", "available", "running", "retryable", "completed"])
async def test_retry_from_other_states_is_rejected(
    aclient: wai.AsyncClient, admin: Admin, state: str
) -> None:
    before = await make(aclient, state)
    with pytest.raises(wai.InvalidStateError, match=f"cannot retry job {before.id}: it is {state}"):
        await admin("retry", before.id)
    assert await aclient.get_job(before.id) == before


async def test_retry_of_a_unique_job_whose_key_was_taken_meanwhile_conflicts(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    unique = wai.UniqueOpts(by_args=True)
    first = await aclient.insert(Work(n=1), queue="q", unique=unique)
    await fetch(aclient, "UPDATE wai.jobs SET " + _FORCE["failed"] + " WHERE id = %s", (first.id,))
    before = await aclient.get_job(first.id)
    await aclient.insert(Work(n=1), queue="q", unique=unique)  # failed no longer holds the key
    with pytest.raises(wai.UniqueConflict):
        await admin("retry", first.id)
    assert await aclient.get_job(first.id) == before


async def test_retry_reruns_a_failed_job_to_completion(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    calls: list[int] = []

    def handler(job: wai.Job[Work]) -> None:
        calls.append(job.attempt)
        if len(calls) == 1:
            raise wai.TerminalError("not yet")

    register(aclient, "async", handler)
    async with serving(aclient):
        job = await aclient.insert(Work())
        failed = await wait_job(aclient, job.id, "failed")
        retried = await admin("retry", job.id)
        done = await wait_job(aclient, job.id, "completed")

    assert retried.state == wai.JobState.AVAILABLE
    assert calls == [1, 2]  # the retry is the job's next attempt
    assert done.errors == failed.errors
    assert "not yet" in done.errors[0]["error"]
    assert done.run_lease == failed.run_lease + 2  # the retry's lease, then the claim's


# -- unknown and hostile ids ---------------------------------------------------------------


@pytest.mark.parametrize("method", ["cancel", "retry", "get_job"])
async def test_unknown_or_non_integer_ids_are_clear_errors(
    aclient: wai.AsyncClient, admin: Admin, method: str
) -> None:
    other = await make(aclient, "failed")
    for job_id in (999_999, 0, -1, 2**63 - 1, 2**63, 2**80):
        with pytest.raises(wai.JobNotFound, match=f"no job with id {job_id}"):
            await admin(method, job_id)
    for bad in ("1", "1; DELETE FROM wai.jobs", 1.0, True, None, [1]):
        with pytest.raises(wai.ValidationError, match="a job id is an integer"):
            await admin(method, bad)
    assert await aclient.get_job(other.id) == other
    assert await count(aclient) == 1


# -- pause, resume ------------------------------------------------------------------------


@dataclass
class Other:
    """Args of a second kind, on queue ``other``."""

    n: int = 0


async def stays(client: wai.AsyncClient, job_id: int, state: str, seconds: float) -> None:
    """Assert the job stays in ``state`` for ``seconds``."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end:
        row = await client.get_job(job_id)
        assert row.state == state, f"job {job_id} left {state}: {row}"
        await asyncio.sleep(0.05)


async def test_pause_stops_claims_and_resume_wakes_the_workers(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    register(aclient, "async", lambda job: None)
    register(aclient, "async", lambda job: None, Other, queue="other")
    await admin("pause_queue", "q")
    async with serving(aclient, {"q": 2, "other": 2}, poll_interval=30):
        held = await aclient.insert(Work())  # inserts still land; the NOTIFY claims nothing
        free = await aclient.insert(Other())
        await wait_job(aclient, free.id, "completed")  # other queues keep running
        await stays(aclient, held.id, "available", 1.0)
        await admin("resume_queue", "q")
        # polling every 30 s cannot explain a pickup within 5 s: resume NOTIFYs the queue
        await wait_job(aclient, held.id, "completed", timeout=5)


async def test_pause_and_resume_are_idempotent_upserts(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    listener = await listening(aclient, "wai.jobs")
    try:
        await admin("pause_queue", "q")
        first = await queues_rows(aclient)
        await admin("pause_queue", "q")
        assert await received(listener, 0.2) == []  # pausing wakes nobody
        assert await queues_rows(aclient) == first  # paused_at of the first pause is kept
        assert first[0][:2] == ("q", True)
        assert first[0][2] is not None

        row = await aclient.insert(Work(), queue="q")
        assert row.state == wai.JobState.AVAILABLE
        assert await received(listener, 0.2) == ["q"]  # the insert's own wakeup

        await admin("resume_queue", "q")
        await admin("resume_queue", "q")
        await admin("resume_queue", "never-paused")
        assert await received(listener) == ["q", "q", "never-paused"]
    finally:
        await listener.close()
    assert await queues_rows(aclient) == [("never-paused", False, None), ("q", False, None)]
    assert await aclient.get_job(row.id) == row


# -- drain ------------------------------------------------------------------------------------


async def test_drain_cancels_only_the_jobs_waiting_to_run(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    before = {state: await make(aclient, state, queue="d") for state in STATES}
    elsewhere = await make(aclient, "available", queue="other")
    listener = await listening(aclient, "wai.cancel")
    try:
        drained = await admin("drain_queue", "d")
        payloads = await received(listener)
    finally:
        await listener.close()

    assert drained == len(WAITING)
    for state, row in before.items():
        after = await aclient.get_job(row.id)
        if state not in WAITING:
            assert after == row, state
            continue
        assert after.state == wai.JobState.CANCELLED, state
        assert after.finalized_at is not None
        assert (after.callback_id, after.heartbeat_at, after.deadline_at) == (None, None, None)
        assert after.errors[:-1] == row.errors
        assert after.errors[-1]["error"] == "cancelled by operator: queue drained"
    assert await aclient.get_job(elsewhere.id) == elsewhere
    # the parked attempt may live in a worker: it is told to stop
    expected = {"job_id": before["waiting_external"].id, "run_lease": 1}
    assert [json.loads(p) for p in payloads] == [expected]
    reason = {"reason": "cancelled by operator: queue drained"}
    waiting = sorted((before[state] for state in WAITING), key=lambda r: r.id)
    # each cancel has a lease of its own
    assert await outbox(aclient) == [(r.id, r.run_lease + 1, "cancelled", reason) for r in waiting]
    assert await admin("drain_queue", "d") == 0
    assert await admin("drain_queue", "no-such-queue") == 0


# -- queue stats -------------------------------------------------------------------------------


async def test_queue_stats_counts_every_state(aclient: wai.AsyncClient, admin: Admin) -> None:
    assert await admin("queue_stats") == []
    for state in STATES:
        await make(aclient, state, queue="a")
    late = await make(aclient, "available", queue="a")
    await fetch(
        aclient, "UPDATE wai.jobs SET run_at = now() - interval '10 seconds' WHERE id = %s",
        (late.id,),
    )  # fmt: skip
    await make(aclient, "completed", queue="c")
    await admin("pause_queue", "b")

    stats = await admin("queue_stats")

    assert [q.name for q in stats] == ["a", "b", "c"]
    a, b, c = stats
    assert isinstance(a, wai.QueueStats)
    assert list(a.counts) == STATES  # every state, in lifecycle order
    assert a.counts == {s: 2 if s == "available" else 1 for s in STATES}
    assert a.total == len(STATES) + 1
    assert 10 <= a.oldest_available_lag < 120
    assert (a.paused, a.paused_at) == (False, None)
    assert b.paused
    assert b.paused_at is not None
    assert b.counts == dict.fromkeys(STATES, 0)
    assert b.oldest_available_lag == 0.0
    assert c.counts["completed"] == 1
    assert c.total == 1
    assert c.oldest_available_lag == 0.0


async def test_queue_stats_estimate_finished_jobs_of_a_large_table(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    # 60,000 finished jobs: more than EXACT_COUNT_LIMIT, so that after an ANALYZE their
    # counts come from the (queue, state) statistics; live jobs stay counted exactly.
    await fetch(
        aclient,
        """
        INSERT INTO wai.jobs (kind, queue, state, attempt, finalized_at)
        SELECT 'k', CASE WHEN g % 4 = 0 THEN 'small' ELSE 'big' END,
               (CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'completed' END)::wai.job_state,
               1, now()
        FROM generate_series(1, 60000) AS g
        """,
    )
    for state in ("available", "running", "scheduled", "retryable", "waiting_external"):
        await make(aclient, state, queue="big")
    exact = {q.name: q for q in await admin("queue_stats")}
    # Before any ANALYZE there is no statistic to estimate from: everything is counted.
    assert exact["big"].estimated == ()
    assert exact["big"].counts["completed"] == 42_000
    assert exact["big"].counts["failed"] == 3_000
    assert exact["small"].counts["completed"] == 12_000

    await fetch(aclient, "ANALYZE wai.jobs")
    await make(aclient, "available", queue="big")  # after the ANALYZE: still counted
    stats = {q.name: q for q in await admin("queue_stats")}

    big, small = stats["big"], stats["small"]
    assert big.estimated == small.estimated == ("completed", "failed", "cancelled")
    assert big.counts["completed"] == pytest.approx(42_000, rel=0.1)
    assert big.counts["failed"] == pytest.approx(3_000, rel=0.25)
    assert small.counts["completed"] == pytest.approx(12_000, rel=0.1)
    assert big.counts["cancelled"] == 0
    live = {s: big.counts[s] for s in [*WAITING, "running"]}
    assert live == {"scheduled": 1, "available": 2, "retryable": 1, "waiting_external": 1,
                    "running": 1}  # fmt: skip
    assert small.counts["available"] == 0


async def test_queue_stats_count_small_tables_exactly_after_analyze(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    for state in STATES:
        await make(aclient, state, queue="a")
    await fetch(aclient, "ANALYZE wai.jobs")
    (a,) = await admin("queue_stats")
    assert a.estimated == ()
    assert a.counts == dict.fromkeys(STATES, 1)


# -- hostile parameters ------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["pause_queue", "resume_queue", "drain_queue"])
async def test_bad_queue_names_are_rejected_and_change_nothing(
    aclient: wai.AsyncClient, admin: Admin, method: str
) -> None:
    job = await make(aclient, "available")
    for name in (HOSTILE, "", "a b", "q" * 201, "q\x00", "q;--", None, 5):
        with pytest.raises(wai.ValidationError, match="invalid queue name"):
            await admin(method, name)
    assert await queues_rows(aclient) == []
    assert await aclient.get_job(job.id) == job
    assert await count(aclient) == 1


async def test_hostile_list_filters_are_data_or_clear_errors(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    job = await make(aclient, "available")
    assert await admin("list_jobs") == [job]
    bad: dict[str, Any]
    for bad in (
        {"state": "bogus"},
        {"limit": 0},
        {"limit": 10**6},
        {"before_id": 2**70},
        {"before_id": 2**63},
        {"before_id": "7"},
        {"trigger_job_id": -(2**63) - 1},
    ):
        with pytest.raises(wai.ValidationError, match="|".join(bad)):  # names the filter
            await admin("list_jobs", **bad)
    for filters in ({"queue": HOSTILE}, {"kind": HOSTILE}, {"tag": HOSTILE}):
        assert await admin("list_jobs", **filters) == []
    assert await aclient.get_job(job.id) == job
