"""wai.testing: run_job, drain and assert_enqueued on a real database, and the pytest plugin."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import wai
from tests.integration._helpers import fetch
from wai.testing import (
    DrainTimeout,
    JobRun,
    assert_enqueued,
    drain,
    run_existing,
    run_job,
)
from wai.testing import _queries as testing_db

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Signup:
    user_id: int
    outcome: str = "complete"


@dataclass
class Welcome:
    user_id: int


@dataclass
class Audit:
    user_id: int


@dataclass
class Step:
    n: int


def register(client: wai.AsyncClient) -> None:
    """Signup does what its args say; each outcome enqueues a follow-up of its own."""

    @client.task(Signup, queue="q", max_attempts=3)
    async def signup(job: wai.Job[Signup]) -> object:
        match job.args.outcome:
            case "fail":
                raise RuntimeError(f"boom for {job.args.user_id}")
            case "fatal":
                raise wai.TerminalError("no such user")
            case "cancel":
                return wai.Cancel("user left")
            case "snooze":
                return wai.Snooze(60)
            case _:
                return None

    @client.task(Welcome, queue="mail")
    async def welcome(job: wai.Job[Welcome]) -> None:
        return None

    @client.task(Audit, queue="mail")
    async def audit(job: wai.Job[Audit]) -> None:
        return None

    client.on_completed_enqueue(
        Signup, lambda args, job: Welcome(user_id=args.user_id), name="welcome"
    )
    client.on_retried_enqueue(Signup, lambda args, job, error, attempt, at: Audit(args.user_id))
    client.on_exhausted_enqueue(Signup, lambda args, job, error, attempt: Audit(-args.user_id))
    client.on_cancelled_enqueue(Signup, lambda args, job, reason: Audit(user_id=0))


async def test_run_job_completed_commits_the_outcome_with_its_followup(
    aclient: wai.AsyncClient,
) -> None:
    register(aclient)
    run = await run_job(aclient, Signup(user_id=7))
    assert isinstance(run, JobRun)
    assert (run.event, run.state, run.error) == ("completed", wai.JobState.COMPLETED, None)
    assert run.job.attempt == 1
    assert run.job.finalized_at is not None
    [welcome] = run.followups
    assert (welcome.kind, welcome.args, welcome.state) == ("welcome", {"user_id": 7}, "available")
    assert welcome.trigger is not None
    assert (welcome.trigger.job_id, welcome.trigger.run_lease) == (run.job.id, run.job.run_lease)
    assert welcome.trigger.outcome == "completed"
    # committed, and seen by another connection: the row and its follow-up
    assert await fetch(aclient, "SELECT state::text FROM wai.jobs WHERE id = %s", [run.job.id]) == [
        ("completed",)
    ]
    assert await fetch(
        aclient, "SELECT kind FROM wai.jobs WHERE trigger_job_id = %s", [run.job.id]
    ) == [("welcome",)]
    assert_enqueued(run, Welcome, count=1, args=Welcome(user_id=7))


async def test_run_job_retried_then_exhausted(aclient: wai.AsyncClient) -> None:
    register(aclient)
    first = await run_job(aclient, Signup(user_id=3, outcome="fail"), max_attempts=2)
    assert (first.event, first.state) == ("retried", wai.JobState.RETRYABLE)
    assert first.error is not None
    assert "boom for 3" in first.error
    assert_enqueued(first, Audit, count=1, args={"user_id": 3})
    # Not available until the retry is due: a clear refusal, then the operator's retry.
    with pytest.raises(wai.InvalidStateError, match=r"is retryable, not available.*due_now"):
        await run_existing(aclient, first.job.id)
    second = await run_existing(aclient, first.job.id, due_now=True)
    assert (second.event, second.state, second.job.attempt) == ("exhausted", "failed", 2)
    # only this attempt's follow-ups, not the first one's
    assert [f.args for f in second.followups] == [{"user_id": -3}]


async def test_run_job_terminal_error_and_the_dead_letter_queue(aclient: wai.AsyncClient) -> None:
    register(aclient)
    run = await run_job(aclient, Signup(user_id=4, outcome="fatal"))
    assert (run.event, run.state, run.dead_lettered) == ("exhausted", "failed", False)
    assert run.error is not None
    assert "no such user" in run.error
    assert_enqueued(run, "audit", args=Audit(user_id=-4))
    # With the dead-letter queue on for "q" (a worker stores its queue settings when it
    # starts), the row moves there in the same transaction, after its follow-ups.
    await aclient.start({"q": wai.QueueConfig(concurrency=1, dlq=True)}, maintenance=False)
    await aclient.shutdown()
    dead = await run_job(aclient, Signup(user_id=5, outcome="fatal"))
    assert (dead.event, dead.state, dead.dead_lettered) == ("exhausted", "failed", True)
    assert (await aclient.get_dlq_entry(dead.job.id)).job.id == dead.job.id
    assert_enqueued(dead, Audit, count=1, args=Audit(user_id=-5))


async def test_run_job_cancelled_and_snoozed(aclient: wai.AsyncClient) -> None:
    register(aclient)
    cancelled = await run_job(aclient, Signup(user_id=5, outcome="cancel"))
    assert (cancelled.event, cancelled.state) == ("cancelled", wai.JobState.CANCELLED)
    assert_enqueued(cancelled, Audit, args=Audit(user_id=0))
    snoozed = await run_job(aclient, Signup(user_id=6, outcome="snooze"))
    assert (snoozed.event, snoozed.state) == ("snoozed", wai.JobState.SCHEDULED)
    assert snoozed.job.attempt == 0  # a snooze gives its attempt back
    assert snoozed.job.run_at > datetime.now(UTC) + timedelta(seconds=30)
    assert snoozed.followups == []
    assert_enqueued(snoozed, Audit, count=0)
    again = await run_existing(aclient, snoozed.job.id, due_now=True)
    assert (again.event, again.job.attempt, again.job.run_lease) == ("snoozed", 0, 2)


async def test_run_job_touches_no_other_job(aclient: wai.AsyncClient) -> None:
    register(aclient)
    other = await aclient.insert(Signup(user_id=1))
    run = await run_job(aclient, Signup(user_id=2))
    assert run.event == "completed"
    untouched = await aclient.get_job(other.id)
    assert (untouched.state, untouched.attempt, untouched.run_lease) == ("available", 0, 0)


async def test_run_existing_refuses_what_a_worker_would_not_claim(
    aclient: wai.AsyncClient,
) -> None:
    register(aclient)
    later = await aclient.insert(Signup(user_id=1), run_at=datetime.now(UTC) + timedelta(hours=1))
    with pytest.raises(wai.InvalidStateError, match="is scheduled, not available"):
        await run_existing(aclient, later.id)
    paused = await aclient.insert(Signup(user_id=2))
    await aclient.pause_queue("q")
    with pytest.raises(wai.InvalidStateError, match="paused queue 'q'"):
        await run_existing(aclient, paused.id)
    await aclient.resume_queue("q")
    done = await run_existing(aclient, paused.id)
    with pytest.raises(wai.InvalidStateError, match="is completed"):
        await run_existing(aclient, done.job.id)
    with pytest.raises(wai.JobNotFound):
        await run_existing(aclient, 10**9)
    assert (await aclient.get_job(later.id)).attempt == 0


async def test_run_job_delivers_hooks_and_runs_def_handlers(aclient: wai.AsyncClient) -> None:
    seen: list[str] = []

    @aclient.task(Step, queue="q")
    def step(job: wai.Job[Step]) -> None:  # a def handler: the executor's thread
        job.set_progress(50, f"step {job.args.n}")
        raise RuntimeError("stepped")

    aclient.on_event(Step, lambda event: seen.append(type(event).__name__))
    run = await run_job(aclient, Step(n=1))
    assert run.event == "retried"
    assert run.job.progress is not None
    assert (run.job.progress["percent"], run.job.progress["message"]) == (50, "step 1")
    assert seen == ["Started", "Retried"]
    assert [type(e).__name__ for e in run.events] == ["Started", "Retried"]


async def test_drain_runs_a_chain_of_followups_and_reports_each_job(
    aclient: wai.AsyncClient,
) -> None:
    @aclient.task(Step, queue="chain")
    async def step(job: wai.Job[Step]) -> object:
        if job.args.n == 2 and job.attempt == 1:
            return wai.RetryAfter(0)  # due at once: promoted and run again
        return None

    aclient.on_completed_enqueue(Step, lambda args, job: Step(n=args.n + 1) if args.n < 3 else None)
    first = await aclient.insert(Step(n=1))
    report = await drain(aclient, timeout=20)
    assert [j.job.args["n"] for j in report] == [1, 2, 3]
    one, two, three = report.jobs
    assert one.id == first.id
    assert (one.state, one.attempts, one.events) == ("completed", 1, ["completed"])
    assert (two.state, two.attempts, two.events) == ("completed", 2, ["retried", "completed"])
    assert [f.id for f in one.followups] == [two.id]
    assert [f.id for f in two.followups] == [three.id]
    assert three.followups == []
    assert report.kinds == ["step"] * 3
    assert report.get(three.id) is three
    assert_enqueued(one, Step, args=Step(n=2))
    # the runtime is gone: nothing claims a job inserted now
    late = await aclient.insert(Step(n=9))
    assert (await aclient.get_job(late.id)).state == "available"


async def test_drain_counts_a_retry_due_at_once_committed_after_its_check_began(
    aclient: wai.AsyncClient,
) -> None:
    """The check's transaction starts (fixing now()) before its snapshot is taken: a retry
    due at once committed in between has a run_at after that now(), and is still left."""
    row = await aclient.insert(Step(n=1))
    async with await psycopg.AsyncConnection.connect(aclient.database_url) as check:
        await check.execute("SELECT 1")  # the transaction and its now() begin here
        async with await psycopg.AsyncConnection.connect(
            aclient.database_url, autocommit=True
        ) as other:
            await other.execute(
                sql.SQL(
                    "UPDATE {}.jobs SET state = 'retryable', run_at = clock_timestamp()"
                    " WHERE id = %s"
                ).format(sql.Identifier(aclient.schema)),
                (row.id,),
            )
        left = await testing_db.job_left_in_queues(check, aclient.schema, [row.queue], limit=5)
    assert [(j.id, j.state) for j in left] == [(row.id, "retryable")]


async def test_drain_leaves_jobs_for_later_and_other_queues(aclient: wai.AsyncClient) -> None:
    register(aclient)
    retry_later = await aclient.insert(Signup(user_id=1, outcome="fail"))
    report = await drain(aclient, ["q"], timeout=20)
    [job] = report.jobs
    assert (job.id, job.state, job.events) == (retry_later.id, "retryable", ["retried"])
    # its follow-up went to "mail", which this drain did not serve
    assert [f.state for f in job.followups] == ["available"]


async def test_drain_times_out_listing_what_is_left(aclient: wai.AsyncClient) -> None:
    @aclient.task(Step, queue="slow")
    async def step(job: wai.Job[Step]) -> None:
        if job.args.n == 1:
            return
        await until_cancelled(job)

    quick = await aclient.insert(Step(n=1))
    stuck = await aclient.insert(Step(n=2))
    with pytest.raises(DrainTimeout) as caught:
        await drain(aclient, ["slow"], timeout=0.5)
    message = str(caught.value)
    assert "timed out after 0.5s" in message
    assert f"job {stuck.id} 'step' in queue 'slow': running" in message
    assert [j.id for j in caught.value.left] == [stuck.id]
    # what committed meanwhile: the quick job, then the stuck one put back by the
    # shutdown (available again, its attempt refunded)
    report = caught.value.report
    assert [(j.id, j.events) for j in report] == [
        (quick.id, ["completed"]),
        (stuck.id, ["snoozed"]),
    ]
    assert (report.get(stuck.id).state, report.get(stuck.id).attempts) == ("available", 0)


async def until_cancelled(job: wai.Job[Step]) -> None:
    """Sleep until the attempt is cancelled (shutdown), at most 30 s."""
    for _ in range(3000):
        if job.is_cancelled():
            raise asyncio.CancelledError
        await asyncio.sleep(0.01)


async def test_assert_enqueued_failure_messages(aclient: wai.AsyncClient) -> None:
    register(aclient)
    run = await run_job(aclient, Signup(user_id=8))
    with pytest.raises(AssertionError) as none:
        assert_enqueued(run, Audit)
    assert str(none.value) == (
        "expected a follow-up job of kind 'audit', found none.\n"
        "The outcome enqueued 1 follow-up job:\n"
        f"  job {run.followups[0].id} kind 'welcome' queue 'mail' args "
        "{\"user_id\": 8}, spec 'welcome'"
    )
    with pytest.raises(
        AssertionError, match=r"expected 2 follow-up jobs of kind 'welcome', found 1"
    ):
        assert_enqueued(run, Welcome, count=2)
    with pytest.raises(
        AssertionError,
        match=r"kind 'welcome' with args \{\"user_id\": 9\}, found none",
    ):
        assert_enqueued(run, Welcome, args=Welcome(user_id=9))
    snoozeless = await run_job(aclient, Welcome(user_id=1))
    with pytest.raises(AssertionError, match=r"The outcome enqueued no follow-up jobs\."):
        assert_enqueued(snoozeless, Welcome)
    assert assert_enqueued(run, "welcome") == run.followups


# -- the plugin, as a user's test suite uses it -------------------------------------------


EXAMPLE = ROOT / "examples" / "testing"

#: Next to the example's tests (docs/testing.md): a failing assertion as its user reads
#: it, a registration that stays in its test, and a schema of each test's own.
USER_EXTRA_TESTS = """
    import wai
    from wai.testing import assert_enqueued, run_job

    from myapp import SendWelcome, client

    SCHEMAS = []


    async def test_registrations_in_a_test_stay_in_it(wai_client: wai.AsyncClient) -> None:
        SCHEMAS.append(wai_client.schema)
        wai_client.on_event(SendWelcome, lambda event: None)
        assert wai_client.registry.hooks
        assert not client.registry.hooks


    async def test_each_test_has_its_schema(wai_client: wai.AsyncClient) -> None:
        assert wai_client.schema not in SCHEMAS
        assert await wai_client.list_jobs() == []


    async def test_a_failing_assertion_reads_well(wai_client: wai.AsyncClient) -> None:
        run = await run_job(wai_client, SendWelcome(email="x@example.com"))
        assert_enqueued(run, SendWelcome)
"""


def _plugin_loads_by_itself() -> bool:
    """Whether the installed wai declares the pytest11 entry point (else ``-p`` loads it)."""
    return any(ep.value.startswith("wai.") for ep in metadata.entry_points(group="pytest11"))


def test_the_plugin_in_a_users_test_suite(tmp_path: Path, database_url: str) -> None:
    """docs/testing.md's example project, run by pytest as its user runs it."""
    for name in ("pytest.ini", "conftest.py", "myapp.py", "test_signup.py"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    (tmp_path / "test_extra.py").write_text(textwrap.dedent(USER_EXTRA_TESTS))
    env = {
        **os.environ,
        # The tests' database; the app's own URL is never opened.
        "WAI_TEST_DATABASE_URL": database_url,
        "WAI_DATABASE_URL": "postgresql://app.invalid/production",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src")]),
    }
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", "."]
    if not _plugin_loads_by_itself():
        args += ["-p", "wai.testing._plugin"]
    done = subprocess.run(
        args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    out = done.stdout + done.stderr
    assert "1 failed, 5 passed" in out, out
    assert "FAILED test_extra.py::test_a_failing_assertion_reads_well" in out, out
    # pytest shows the test's line, then the message listing what was enqueued
    assert ">       assert_enqueued(run, SendWelcome)" in out, out
    assert "expected a follow-up job of kind 'send_welcome', found none." in out, out
    assert "The outcome enqueued no follow-up jobs." in out, out
    # every schema the fixtures made was dropped again
    with psycopg.connect(database_url) as conn:
        left = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'wai_test_%'"
        ).fetchall()
    assert left == []


def test_the_plugin_is_declared_as_a_pytest11_entry_point() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"] == {"wai": "wai.testing._plugin"}


async def test_run_job_parks_on_a_callback_and_the_resolution_completes_it(
    aclient: wai.AsyncClient,
) -> None:
    @aclient.task(Step, queue="q")
    async def step(job: wai.Job[Step]) -> wai.WaitForCallback:
        token = await job.register_callback(timeout=600)
        return wai.WaitForCallback(token)

    aclient.on_waiting_for_callback_enqueue(Step, lambda args, job: Audit(user_id=args.n))
    run = await run_job(aclient, Step(n=4))
    assert (run.event, run.state) == ("waiting_for_callback", wai.JobState.WAITING_EXTERNAL)
    assert run.job.callback_id is not None
    assert_enqueued(run, Audit, count=1, args=Audit(user_id=4))
    done = await aclient.complete_external(run.job.callback_id, {"ok": True})
    assert done.state == "completed"


EMBEDDED_PROJECT = {
    "myapp.py": """
        from dataclasses import dataclass

        import wai

        client = wai.AsyncClient("postgresql://app.invalid/production")  # never opened


        @dataclass
        class Hello:
            name: str


        @client.task(Hello, queue="hello")
        async def hello(job: wai.Job[Hello]) -> None:
            return None
    """,
    "conftest.py": """
        import pytest


        @pytest.fixture
        def wai_app():
            from myapp import client

            return client
    """,
    "test_hello.py": """
        from wai.testing import run_job

        from myapp import Hello


        async def test_hello(wai_client):
            run = await run_job(wai_client, Hello(name="Ada"))
            assert run.event == "completed"
    """,
}


def test_the_plugin_falls_back_to_the_embedded_postgresql(tmp_path: Path) -> None:
    """No database URL anywhere: the fixtures start wai's embedded PostgreSQL (here in a
    directory of the test's own, WAI_EMBEDDED_DIR) and the user's test runs on it."""
    for name, text in EMBEDDED_PROJECT.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    data = tmp_path / "pg"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("WAI_TEST_DATABASE_URL", "WAI_DATABASE_URL", "DATABASE_URL")
        and not k.startswith("PG")
    }
    env["WAI_EMBEDDED_DIR"] = str(data)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT / "src")])
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rootdir", "."]
    if not _plugin_loads_by_itself():
        args += ["-p", "wai.testing._plugin"]
    try:
        done = subprocess.run(
            args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False
        )
        out = done.stdout + done.stderr
        assert "1 passed" in out, out
        assert any(data.iterdir()), "the embedded server's data directory is empty"
    finally:
        subprocess.run(
            [sys.executable, "-m", "wai", "embedded", "stop"],
            env=env, capture_output=True, timeout=60, check=False,
        )  # fmt: skip
