"""One job's closure or outcome can cost only that job: never its batch, never the worker.

Against a real PostgreSQL and the real finalizer: closures that raise anything, outcomes
the database refuses (NUL bytes, lone surrogates, infinite delays), closures evaluated
before the write takes its row locks, and the row a closure sees being the row that commits.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

import wai
from tests.integration._helpers import fetch, serving, wait_for, wait_job
from wai._context import AttemptState
from wai._job import JobRow, JobState
from wai._outcomes import Outcome
from wai.worker import _queries as worker_db
from wai.worker._finalizer import Finalizer

pytestmark = pytest.mark.timeout(60)


@dataclass
class Signup:
    user_id: int


@dataclass
class Welcome:
    user_id: int


@pytest.fixture
def tasks(aclient: wai.AsyncClient) -> None:
    @aclient.task(Signup, queue="q", max_attempts=3)
    async def signup(job: wai.Job[Signup]) -> None:
        return None

    @aclient.task(Welcome, queue="mail")
    async def welcome(job: wai.Job[Welcome]) -> None:
        return None


async def claim(client: wai.AsyncClient, n: int) -> list[JobRow]:
    async with client._connection() as conn:
        return await worker_db.job_claim(
            conn, client.schema, queue="q", limit=n, deadlines={}, default_deadline=None
        )


def outcome(row: JobRow, state: JobState, event: str, **kw: Any) -> Outcome:
    return Outcome(job_id=row.id, run_lease=row.run_lease, state=state, event=event, **kw)


async def finalize(
    client: wai.AsyncClient, batch: Sequence[tuple[Outcome, JobRow]]
) -> list[tuple[Outcome, AttemptState]]:
    """Write ``batch`` as one batch of a real finalizer; what it handed back as settled."""
    settled: list[tuple[Outcome, AttemptState]] = []
    finalizer = Finalizer(
        client.pool,
        client.schema,
        batch_size=512,
        flush_interval=0.0,
        on_committed=lambda done, rows: settled.extend(done),
        registry=client.registry,
        busy=lambda: 0,
    )
    loop = asyncio.get_running_loop()
    states = {row.id: AttemptState(row, loop) for _, row in batch}
    for o, row in batch:
        finalizer.submit(o, states[row.id])
    task = asyncio.create_task(finalizer.run_forever())
    try:
        await wait_for(lambda: len({o.job_id for o, _ in settled}) == len(batch), timeout=20)
        await finalizer.wait_idle()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return settled


async def followups_of(client: wai.AsyncClient, job_id: int) -> list[JobRow]:
    return await client.list_jobs(trigger_job_id=job_id)


POISON_OUTCOMES = {
    "nul in the error": {
        "state": JobState.RETRYABLE,
        "event": "retried",
        "error": "a\x00b",
        "delay": 1.0,
    },
    "surrogate in the error": {
        "state": JobState.FAILED,
        "event": "exhausted",
        "error": "bad \ud800 text",
        "terminal": True,
    },
    "infinite delay": {
        "state": JobState.RETRYABLE,
        "event": "retried",
        "error": "x",
        "delay": 1e300,
    },
    "nul in the cancel reason": {
        "state": JobState.CANCELLED,
        "event": "cancelled",
        "error": "cancelled: a\x00",
        "reason": "a\x00",
    },
}


@pytest.mark.parametrize("with_specs", [False, True], ids=["lean", "with-followups"])
@pytest.mark.parametrize("poison", list(POISON_OUTCOMES))
async def test_an_outcome_the_database_refuses_costs_only_its_own_job(
    aclient: wai.AsyncClient, tasks: None, poison: str, with_specs: bool
) -> None:
    if with_specs:
        for register in (aclient.on_completed_enqueue, aclient.on_retried_enqueue):
            register(Signup, lambda a, j, *rest: Welcome(user_id=a.user_id))
    await aclient.insert_many([Signup(user_id=i) for i in range(40)])
    rows = await claim(aclient, 40)
    bad = rows[17]
    batch = [
        (outcome(r, JobState.COMPLETED, "completed"), r)
        if r is not bad
        else (outcome(r, **POISON_OUTCOMES[poison]), r)
        for r in rows
    ]
    await finalize(aclient, batch)
    states = dict(
        await fetch(aclient, "SELECT id, state::text FROM wai.jobs WHERE kind = 'signup'")
    )
    assert [i for i, s in states.items() if s != "completed"] == [bad.id]
    job = await aclient.get_job(bad.id)
    # A failed attempt records, readably, why the outcome could not be written.
    assert job.state == "retryable"
    assert job.attempt == 1
    error = job.errors[-1]["error"]
    assert "could not write this attempt's outcome" in error
    assert "\x00" not in error
    error.encode("utf-8")  # storable: no lone surrogate
    if with_specs:
        for r in rows:
            follows = await followups_of(aclient, r.id)
            expected = ["retried"] if r is bad else ["completed"]
            assert [f.trigger.outcome for f in follows if f.trigger] == expected


@pytest.mark.parametrize(
    "closure",
    [
        pytest.param(lambda a, j: wai.EnqueueRequest(Welcome(1), tags=None), id="TypeError"),  # type: ignore[arg-type]
        pytest.param(lambda a, j: {"not": "args"}, id="a dict"),
        pytest.param(lambda a, j: Welcome(user_id=threading.Lock()), id="not JSON"),  # type: ignore[arg-type]
        pytest.param(lambda a, j: (_ for _ in ()).throw(KeyboardInterrupt), id="KeyboardInterrupt"),
    ],
)
async def test_a_closure_raising_anything_costs_only_its_own_job(
    aclient: wai.AsyncClient, tasks: None, closure: Any
) -> None:
    def maybe(a: Signup, j: JobRow) -> Any:
        return closure(a, j) if a.user_id == 5 else Welcome(user_id=a.user_id)

    aclient.on_completed_enqueue(Signup, maybe, name="maybe")
    await aclient.insert_many([Signup(user_id=i) for i in range(10)])
    rows = await claim(aclient, 10)
    try:
        await finalize(aclient, [(outcome(r, JobState.COMPLETED, "completed"), r) for r in rows])
    except KeyboardInterrupt:
        pytest.fail("a closure's KeyboardInterrupt escaped the finalizer")
    for r in rows:
        job = await aclient.get_job(r.id)
        follows = await followups_of(aclient, r.id)
        if r.args["user_id"] != 5:
            assert job.state == "completed"
            assert len(follows) == 1
            continue
        assert job.state == "retryable"
        assert "follow-up spec 'maybe'" in job.errors[-1]["error"]
        assert follows == []


async def test_a_poison_closure_has_a_bounded_fate_in_a_running_worker(
    aclient: wai.AsyncClient, tasks: None
) -> None:
    def divide(a: Signup, j: JobRow) -> Welcome:
        return Welcome(user_id=1 // (1 - a.user_id))

    aclient.on_completed_enqueue(Signup, divide, name="divide")
    good, bad = await aclient.insert_many([Signup(user_id=0), Signup(user_id=1)])
    async with serving(aclient, {"q": 2, "mail": 2}):
        await wait_job(aclient, good.id, "completed")
    # Retried with backoff: make each retry due at once, three attempts in all.
    row: JobRow | None = None
    for _ in range(5):
        before = (await aclient.get_job(bad.id)).attempt
        await fetch(aclient, "UPDATE wai.jobs SET run_at = now() WHERE state = 'retryable'")
        async with serving(aclient, {"q": 2, "mail": 2}):
            # promoted, claimed and finished once more: its next attempt's outcome
            row = await wait_job(
                aclient,
                bad.id,
                lambda r, n=before: r.attempt > n and r.state != "running",
                timeout=10,
            )
        if row.state == "failed":
            break
    assert row is not None
    assert row.state == "failed"
    assert row.attempt == 3
    assert all("divide" in e["error"] for e in row.errors)


async def test_closures_run_before_the_write_locks_the_rows_and_off_the_event_loop(
    aclient: wai.AsyncClient, tasks: None, database_url: str
) -> None:
    seen: list[tuple[bool, bool]] = []
    loop_thread = threading.get_ident()

    def probe(a: Signup, j: JobRow) -> Welcome:
        # Another session may lock the row NOWAIT: the finalizing write holds no lock yet.
        with psycopg.connect(database_url, autocommit=True) as other:
            try:
                other.execute("SELECT 1 FROM wai.jobs WHERE id = %s FOR UPDATE NOWAIT", (j.id,))
                unlocked = True
            except psycopg.errors.LockNotAvailable:
                unlocked = False
        seen.append((unlocked, threading.get_ident() != loop_thread))
        return Welcome(user_id=a.user_id)

    aclient.on_completed_enqueue(Signup, probe)
    await aclient.insert_many([Signup(user_id=i) for i in range(3)])
    rows = await claim(aclient, 3)
    await finalize(aclient, [(outcome(r, JobState.COMPLETED, "completed"), r) for r in rows])
    assert seen == [(True, True)] * 3
    for r in rows:
        assert len(await followups_of(aclient, r.id)) == 1


CASES = [
    ("completed", JobState.COMPLETED, {}),
    ("retried", JobState.RETRYABLE, {"error": "boom", "delay": 60.5}),
    ("exhausted", JobState.FAILED, {"error": "fatal", "terminal": True}),
    ("cancelled", JobState.CANCELLED, {"error": "cancelled: nope", "reason": "nope"}),
]


@pytest.mark.parametrize(("event", "state", "extra"), CASES)
async def test_the_row_a_closure_sees_is_the_row_that_commits(
    aclient: wai.AsyncClient, tasks: None, event: str, state: JobState, extra: dict[str, Any]
) -> None:
    seen: list[JobRow] = []

    def capture(a: Signup, j: JobRow, *rest: Any) -> Welcome:
        seen.append(j)
        return Welcome(user_id=a.user_id)

    getattr(aclient, f"on_{event}_enqueue")(Signup, capture)
    await aclient.insert(Signup(user_id=1), metadata={"m": 1}, tags=["t"])
    [row] = await claim(aclient, 1)
    progress = '{"percent": 50, "message": "half", "metadata": {"k": "v"}}'
    await finalize(aclient, [(outcome(row, state, event, progress=progress, **extra), row)])
    committed = await aclient.get_job(row.id)
    assert seen == [committed]  # every field, timestamps and error entries included
    [follow] = await followups_of(aclient, row.id)
    assert follow.trigger is not None
    assert follow.trigger == wai.Trigger(
        job_id=row.id, run_lease=row.run_lease, outcome=event, spec=follow.trigger.spec
    )


async def test_a_row_changed_since_the_claim_is_planned_again_from_what_commits(
    aclient: wai.AsyncClient, tasks: None
) -> None:
    seen: list[dict[str, Any]] = []

    def capture(a: Signup, j: JobRow) -> Welcome:
        seen.append(j.metadata)
        return Welcome(user_id=j.metadata["n"])

    aclient.on_completed_enqueue(Signup, capture)
    await aclient.insert(Signup(user_id=1), metadata={"n": 1})
    [row] = await claim(aclient, 1)
    # Something outside the attempt changes the row between its claim and its outcome.
    await fetch(aclient, "UPDATE wai.jobs SET metadata = '{\"n\": 2}' WHERE id = %s", (row.id,))
    await finalize(aclient, [(outcome(row, JobState.COMPLETED, "completed"), row)])
    assert seen == [{"n": 1}, {"n": 2}]  # planned on the claim, then again on the commit
    [follow] = await followups_of(aclient, row.id)
    assert follow.args == {"user_id": 2}


@dataclass
class Park:
    user_id: int


async def test_a_park_is_planned_once_on_the_row_that_commits(
    aclient: wai.AsyncClient, tasks: None
) -> None:
    seen: list[JobRow] = []

    @aclient.task(Park, queue="park")
    async def park(job: wai.Job[Park]) -> wai.WaitForCallback:
        return wai.WaitForCallback(await job.register_callback(timeout=600))

    def capture(a: Park, j: JobRow) -> Welcome:
        seen.append(j)
        return Welcome(user_id=a.user_id)

    aclient.on_waiting_for_callback_enqueue(Park, capture)
    job = await aclient.insert(Park(user_id=3))
    async with serving(aclient, {"park": 1}):
        parked = await wait_job(aclient, job.id, "waiting_external")
    assert seen == [parked]  # the planned row matched: the closure ran once
    assert parked.callback_id is not None
    assert parked.callback_timeout_at is not None
    [follow] = await followups_of(aclient, job.id)
    assert follow.args == {"user_id": 3}
