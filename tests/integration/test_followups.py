"""Follow-up specs and hooks: atomic with the outcome, lineage, failure semantics."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import wai
from tests.integration._helpers import count, fetch, serving, wait_for, wait_job
from wai._job import JobState
from wai._outcomes import Outcome
from wai.testing import drain, run_job
from wai.transitions._finalize import apply_outcomes
from wai.worker import _queries as worker_db


@dataclass
class Signup:
    user_id: int


@dataclass
class Welcome:
    user_id: int


async def claim(client: wai.AsyncClient, n: int = 10) -> list[wai.JobRow]:
    async with client._connection() as conn:
        return await worker_db.job_claim(
            conn, client.schema, queue="q", limit=n, deadlines={}, default_deadline=None
        )


def outcome(row: wai.JobRow, state: JobState, event: str, **kw: Any) -> Outcome:
    return Outcome(job_id=row.id, run_lease=row.run_lease, state=state, event=event, **kw)


async def apply(client: wai.AsyncClient, outcomes: list[Outcome]) -> Any:
    async with client._connection() as conn:
        return await apply_outcomes(conn, client.schema, client.registry, outcomes)


async def followups_of(client: wai.AsyncClient, job_id: int) -> list[wai.JobRow]:
    return list(reversed(await client.list_jobs(trigger_job_id=job_id)))


@pytest.fixture
def signup_task(aclient: wai.AsyncClient) -> None:
    @aclient.task(Signup, queue="q")
    async def signup(job: wai.Job[Signup]) -> None:
        return None

    @aclient.task(Welcome, queue="mail")
    async def welcome(job: wai.Job[Welcome]) -> None:
        return None


CASES = [
    ("completed", JobState.COMPLETED, {}),
    ("retried", JobState.RETRYABLE, {"error": "boom", "delay": 60.0}),
    ("exhausted", JobState.FAILED, {"error": "fatal", "terminal": True}),
    ("cancelled", JobState.CANCELLED, {"error": "cancelled: nope", "reason": "nope"}),
]


@pytest.mark.parametrize(("event", "state", "extra"), CASES)
async def test_followup_commits_with_its_outcome_and_records_lineage(
    aclient: wai.AsyncClient, signup_task: None, event: str, state: JobState, extra: dict[str, Any]
) -> None:
    seen: list[tuple[Any, ...]] = []

    def spec(*a: Any) -> Welcome:
        seen.append(a)
        return Welcome(user_id=a[0].user_id)

    aclient.registry.add_spec(Signup, event, spec, with_request=False, name="welcome")
    job = await aclient.insert(Signup(user_id=5))
    (row,) = await claim(aclient)
    applied = await apply(aclient, [outcome(row, state, event, **extra)])
    assert [r.id for r in applied.rows] == [job.id]
    (follow,) = await followups_of(aclient, job.id)
    assert follow.kind == "welcome"
    assert follow.args == {"user_id": 5}
    assert follow.queue == "mail"  # the follow-up kind's registered queue
    assert follow.trigger == wai.Trigger(
        job_id=job.id, run_lease=row.run_lease, outcome=event, spec="welcome"
    )
    args, committed = seen[0][0], seen[0][1]
    assert args == Signup(user_id=5)
    assert committed.state == state  # the closure saw the post-transition row
    if event == "retried":
        assert seen[0][2] == "boom"
        assert seen[0][3] == 1
        assert seen[0][4] == committed.run_at
    if event == "exhausted":
        assert seen[0][2:] == ("fatal", 1)
    if event == "cancelled":
        assert seen[0][2] == "nope"


async def test_stale_lease_commits_no_followup(aclient: wai.AsyncClient, signup_task: None) -> None:
    aclient.on_completed_enqueue(Signup, lambda a, j: Welcome(user_id=a.user_id))
    job = await aclient.insert(Signup(user_id=1))
    (row,) = await claim(aclient)
    stale = Outcome(
        job_id=row.id, run_lease=row.run_lease + 1, state=JobState.COMPLETED, event="completed"
    )
    applied = await apply(aclient, [stale])
    assert applied.rows == []
    assert await followups_of(aclient, job.id) == []
    assert (await aclient.get_job(job.id)).state == JobState.RUNNING


async def test_two_specs_stack_in_registration_order(
    aclient: wai.AsyncClient, signup_task: None
) -> None:
    aclient.on_completed_enqueue(Signup, lambda a, j: Welcome(user_id=1), name="first")

    @aclient.on_completed_enqueue(Signup, name="second")
    def second(a: Signup, j: wai.JobRow) -> Welcome:
        return Welcome(user_id=2)

    job = await aclient.insert(Signup(user_id=1))
    (row,) = await claim(aclient)
    await apply(aclient, [outcome(row, JobState.COMPLETED, "completed")])
    follows = await followups_of(aclient, job.id)
    assert [f.trigger.spec for f in follows if f.trigger] == ["first", "second"]
    assert [f.args["user_id"] for f in follows] == [1, 2]


@pytest.mark.parametrize("with_request", [False, True])
async def test_followup_defaults_to_its_kinds_registered_queue_and_max_attempts(
    aclient: wai.AsyncClient, with_request: bool
) -> None:
    @aclient.task(Signup, queue="q")
    async def signup(job: wai.Job[Signup]) -> None:
        return None

    @aclient.task(Welcome, queue="mail", max_attempts=3)
    async def welcome(job: wai.Job[Welcome]) -> None:
        return None

    if with_request:
        aclient.on_completed_enqueue_with(
            Signup, lambda a, j: wai.EnqueueRequest(Welcome(user_id=a.user_id), priority=1)
        )
    else:
        aclient.on_completed_enqueue(Signup, lambda a, j: Welcome(user_id=a.user_id))
    job = await aclient.insert(Signup(user_id=3))
    (row,) = await claim(aclient)
    await apply(aclient, [outcome(row, JobState.COMPLETED, "completed")])
    (follow,) = await followups_of(aclient, job.id)
    assert (follow.kind, follow.queue, follow.max_attempts) == ("welcome", "mail", 3)
    assert follow.priority == (1 if with_request else 2)
    assert follow.args == {"user_id": 3}


async def test_with_form_overrides_insert_options(
    aclient: wai.AsyncClient, signup_task: None
) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)

    @aclient.on_completed_enqueue_with(Signup)
    def spec(a: Signup, j: wai.JobRow) -> wai.EnqueueRequest:
        return wai.EnqueueRequest(
            Welcome(user_id=a.user_id),
            queue="vip",
            priority=1,
            run_at=later,
            tags=["x"],
            unique=wai.UniqueOpts(),
        )

    job = await aclient.insert(Signup(user_id=9))
    (row,) = await claim(aclient)
    await apply(aclient, [outcome(row, JobState.COMPLETED, "completed")])
    (follow,) = await followups_of(aclient, job.id)
    assert (follow.queue, follow.priority, follow.state) == ("vip", 1, JobState.SCHEDULED)
    assert abs((follow.run_at - later).total_seconds()) < 0.001
    assert follow.tags == ("x",)
    assert follow.unique_key is not None


@pytest.mark.parametrize(
    "bad",
    [
        lambda a, j: 1 / 0,  # raises
        lambda a, j: 42,  # wrong type
        lambda a, j: None,  # nothing
        lambda a, j: {"user_id": 1},  # a dict without a kind
    ],
)
async def test_failing_spec_rolls_back_only_its_own_job(
    aclient: wai.AsyncClient, signup_task: None, bad: Any
) -> None:
    def good_or_bad(a: Signup, j: wai.JobRow) -> Any:
        return bad(a, j) if a.user_id == 2 else Welcome(user_id=a.user_id)

    aclient.on_completed_enqueue(Signup, good_or_bad, name="maybe")
    jobs = await aclient.insert_many([Signup(user_id=i) for i in (1, 2, 3)])
    rows = await claim(aclient)
    applied = await apply(aclient, [outcome(r, JobState.COMPLETED, "completed") for r in rows])
    assert sorted(r.id for r in applied.rows) == [jobs[0].id, jobs[2].id]
    ((rejected, error),) = applied.rejected
    assert rejected.job_id == jobs[1].id
    assert isinstance(error, wai.FollowUpError)
    assert "maybe" in str(error)
    assert (await aclient.get_job(jobs[1].id)).state == JobState.RUNNING
    assert await followups_of(aclient, jobs[1].id) == []
    for j in (jobs[0], jobs[2]):
        assert len(await followups_of(aclient, j.id)) == 1
        assert (await aclient.get_job(j.id)).state == JobState.COMPLETED


async def test_failing_followup_insert_isolates_the_job(
    aclient: wai.AsyncClient, signup_task: None
) -> None:
    @aclient.on_completed_enqueue_with(Signup)
    def spec(a: Signup, j: wai.JobRow) -> wai.EnqueueRequest:
        # Every trigger enqueues the same unique follow-up: only the first can commit.
        return wai.EnqueueRequest(Welcome(user_id=0), unique=wai.UniqueOpts())

    await aclient.insert(Welcome(user_id=0), unique=wai.UniqueOpts())
    await aclient.insert_many([Signup(user_id=i) for i in (1, 2)])
    rows = await claim(aclient)
    applied = await apply(aclient, [outcome(r, JobState.COMPLETED, "completed") for r in rows])
    assert applied.rows == []
    assert len(applied.rejected) == 2
    assert all("follow-up insert failed" in str(e) for _, e in applied.rejected)
    assert await count(aclient, "state = 'running'") == 2


async def test_worker_records_a_failing_spec_as_a_retryable_failure(
    aclient: wai.AsyncClient, signup_task: None
) -> None:
    def spec(a: Signup, j: wai.JobRow) -> Welcome:
        if a.user_id == 2:
            raise ValueError("no template")
        return Welcome(user_id=a.user_id)

    aclient.on_completed_enqueue(Signup, spec, name="welcome-spec")
    retried: list[wai.JobRow] = []
    aclient.on_retried_enqueue(
        Signup, lambda a, j, e, n, t: retried.append(j) or Welcome(user_id=-1)
    )
    jobs = await aclient.insert_many([Signup(user_id=i) for i in (1, 2, 3)])
    async with serving(aclient, {"q": 4, "mail": 2}):
        bad = await wait_job(aclient, jobs[1].id, "retryable")
        for j in (jobs[0], jobs[2]):
            await wait_job(aclient, j.id, "completed")
    assert bad.attempt == 1
    assert "welcome-spec" in bad.errors[-1]["error"]
    assert "no template" in bad.errors[-1]["error"]
    # The failure transition dispatched its own (retried) specs, in its own transaction.
    follows = await followups_of(aclient, jobs[1].id)
    assert [f.trigger.outcome for f in follows if f.trigger] == ["retried"]
    assert [f.args for f in follows] == [{"user_id": -1}]


async def test_failure_specs_that_fail_too_go_to_the_outbox_never_to_rescue(
    aclient: wai.AsyncClient, signup_task: None
) -> None:
    aclient.on_completed_enqueue(Signup, lambda a, j: 1 / 0)
    aclient.on_retried_enqueue(Signup, lambda a, j, e, n, t: 1 / 0)
    # One attempt through the worker's executor and finalizer, committed.
    run = await run_job(aclient, Signup(user_id=1))
    row, job = run.job, run.job
    # The failed attempt is recorded; its own (retried) specs, which fail as well, wait in
    # the outbox in the same transaction: durable, retried with backoff, visible.
    assert (run.event, row.state, row.attempt) == ("retried", "retryable", 1)
    assert run.error is not None
    assert "ZeroDivisionError" in run.error
    assert "ZeroDivisionError" in row.errors[-1]["error"]
    assert run.followups == []
    assert await followups_of(aclient, job.id) == []
    outbox = await fetch(
        aclient, "SELECT outcome, run_lease FROM wai.outbox WHERE job_id = %s", (job.id,)
    )
    assert outbox == [("retried", row.run_lease)]


async def test_drain_with_followups_counts_one_per_trigger(
    aclient: wai.AsyncClient, signup_task: None
) -> None:
    aclient.on_completed_enqueue(Signup, lambda a, j: Welcome(user_id=a.user_id))
    await aclient.insert_many([Signup(user_id=i) for i in range(300)])
    report = await drain(aclient, ["q", "mail"], timeout=30, concurrency=16)
    assert len(report) == 600
    assert {job.state for job in report} == {"completed"}
    assert all(len(job.followups) == (job.kind == "signup") for job in report)
    assert await _done(aclient)
    rows = await fetch(
        aclient,
        "SELECT t.id, count(f.id) FROM wai.jobs t LEFT JOIN wai.jobs f"
        " ON f.trigger_job_id = t.id WHERE t.kind = 'signup' GROUP BY t.id",
    )
    assert len(rows) == 300
    assert all(n == 1 for _, n in rows)


async def _done(client: wai.AsyncClient) -> bool:
    return await count(client, "state = 'completed'") == 600


async def test_hook_sees_the_committed_row_and_its_failure_changes_nothing(
    aclient: wai.AsyncClient, signup_task: None, database_url: str
) -> None:
    seen: list[tuple[str, str]] = []

    @aclient.on_event(Signup)
    async def observe(event: wai.events.JobEvent) -> None:
        if isinstance(event, wai.events.Completed):
            async with await psycopg.AsyncConnection.connect(database_url) as other:
                cur = await other.execute(
                    "SELECT state::text FROM wai.jobs WHERE id = %s", (event.job.id,)
                )
                row = await cur.fetchone()
                assert row is not None
                seen.append((type(event).__name__, row[0]))

    def broken(event: wai.events.JobEvent) -> None:
        raise RuntimeError("hook bug")

    aclient.on_event(Signup, broken)
    later: list[str] = []
    aclient.on_event("*", lambda e: later.append(type(e).__name__))
    job = await aclient.insert(Signup(user_id=1))
    async with serving(aclient, {"q": 2}):
        await wait_job(aclient, job.id, "completed")
        await wait_for(lambda: len(seen) == 1 and "Completed" in later, what="hooks")
    assert seen == [("Completed", "completed")]
    assert later[:2] == ["Started", "Completed"]


async def test_registration_rejects_bad_input(aclient: wai.AsyncClient) -> None:
    with pytest.raises(wai.ValidationError):
        aclient.registry.add_spec(Signup, "finished", lambda a, j: None, with_request=False)
    aclient.on_completed_enqueue(Signup, lambda a, j: None, name="x")
    with pytest.raises(wai.ValidationError):
        aclient.on_completed_enqueue(Signup, lambda a, j: None, name="x")
    with pytest.raises(wai.ValidationError):
        aclient.on_event(Signup, "not callable")  # type: ignore[arg-type]
    # Two unnamed lambdas get distinct lineage names.
    aclient.on_cancelled_enqueue(Signup, lambda a, j, r: None)
    aclient.on_cancelled_enqueue(Signup, lambda a, j, r: None)
    names = [s.name for s in aclient.registry.specs_for("signup", "cancelled")]
    assert len(set(names)) == 2
