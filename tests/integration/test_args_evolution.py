"""Evolving an args type while jobs of the old shape wait in the table (docs/args.md,
"Evolving an args type"): what decodes, what fails and how it says so, and how a
renamed kind keeps its waiting jobs running.

Each test stores jobs as an older release wrote them (the stored JSON), then runs the
workers of the newer release (the types registered now).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import wai
from tests.integration._helpers import serving, wait_for, wait_job


@dataclass
class SignupV2Optional:
    user_id: int
    plan: str = "free"  # added with a default: old jobs decode


@dataclass
class SignupV2Required:
    user_id: int
    plan: str  # added without one: old jobs cannot decode


@dataclass
class Payment:
    amount: float  # was an int in the release that stored the jobs
    email: str | None = None  # the new name, step 1 of a rename ...
    mail: str | None = None  # ... the old one, kept until no stored job uses it


async def dead_letter(client: wai.AsyncClient, job_id: int) -> wai.DlqEntry | None:
    try:
        return await client.get_dlq_entry(job_id)
    except wai.JobNotFound:
        return None


async def run_one(client: wai.AsyncClient, stored: dict[str, Any], kind: str) -> wai.JobRow:
    async with serving(client):
        row = await client.insert(stored, kind=kind)
        return await wait_job(client, row.id, lambda r: r.state in ("completed", "failed"))


async def test_an_added_field_with_a_default_and_a_removed_field_keep_old_jobs_running(
    aclient: wai.AsyncClient,
) -> None:
    seen: list[SignupV2Optional] = []

    @aclient.task(SignupV2Optional, kind="signup", queue="q")
    async def signup(job: wai.Job[SignupV2Optional]) -> None:
        seen.append(job.args)

    # stored by a release whose Signup had user_id and a field since removed
    row = await run_one(aclient, {"user_id": 7, "referrer": "gone"}, "signup")
    assert row.state == "completed"
    assert seen == [SignupV2Optional(user_id=7, plan="free")]


async def test_a_widened_type_and_a_field_renamed_in_two_steps_decode(
    aclient: wai.AsyncClient,
) -> None:
    seen: list[tuple[float, str | None]] = []

    @aclient.task(Payment, kind="payment", queue="q")
    async def payment(job: wai.Job[Payment]) -> None:
        seen.append((job.args.amount, job.args.email or job.args.mail))

    old = await run_one(aclient, {"amount": 12, "mail": "a@example.com"}, "payment")
    new = await run_one(aclient, {"amount": 12.5, "email": "b@example.com"}, "payment")
    assert (old.state, new.state) == ("completed", "completed")
    assert seen == [(12.0, "a@example.com"), (12.5, "b@example.com")]
    assert isinstance(seen[0][0], float)


async def test_undecodable_args_fail_their_job_naming_it_and_the_field_then_retry_after_a_fix(
    aclient: wai.AsyncClient,
) -> None:
    @aclient.task(SignupV2Required, kind="signup", queue="q")
    async def strict(job: wai.Job[SignupV2Required]) -> None:
        return None

    async with serving(aclient, {"q": wai.QueueConfig(concurrency=2, dlq=True)}):
        bad = await aclient.insert({"user_id": 1}, kind="signup")
        good = await aclient.insert({"user_id": 2, "plan": "pro"}, kind="signup")
        await wait_job(aclient, good.id, "completed")
        entry = await wait_for(
            lambda: dead_letter(aclient, bad.id), 10, what="the job in the dead-letter queue"
        )
    (error,) = entry.job.errors
    assert error["terminal"] is True  # retrying the same args could not help
    assert error["error"].startswith(f"undecodable args for job {bad.id} ('signup'): ")
    assert "SignupV2Required: object missing required field `plan`" in error["error"]

    # the fix deployed (the field gets a default): the dead letter runs again, and completes
    client = wai.AsyncClient(aclient.database_url, schema=aclient.schema)
    seen: list[SignupV2Optional] = []

    @client.task(SignupV2Optional, kind="signup", queue="q")
    async def lenient(job: wai.Job[SignupV2Optional]) -> None:
        seen.append(job.args)

    async with client:
        retried = await client.retry_from_dlq(bad.id)
        async with serving(client, {"q": 2}):
            await wait_job(client, retried.id, "completed")
    assert seen == [SignupV2Optional(user_id=1, plan="free")]


async def test_a_renamed_kind_keeps_its_waiting_jobs_running_under_the_old_name(
    aclient: wai.AsyncClient,
) -> None:
    done: list[str] = []

    @wai.kind(name="account_signup", queue="q")
    @dataclass
    class AccountSignup:
        user_id: int

    @aclient.task(AccountSignup)
    async def new(job: wai.Job[AccountSignup]) -> None:
        done.append(f"{job.kind}:{job.args.user_id}")

    # the old name stays registered until no stored job has it: same handler, same type
    @aclient.task(AccountSignup, kind="signup", queue="q")
    async def old(job: wai.Job[AccountSignup]) -> None:
        await new(job)

    async with serving(aclient):
        waiting = await aclient.insert({"user_id": 1}, kind="signup")  # stored before the rename
        fresh = await aclient.insert(AccountSignup(user_id=2))
        await wait_job(aclient, waiting.id, "completed")
        await wait_job(aclient, fresh.id, "completed")
    assert fresh.kind == "account_signup"
    assert sorted(done) == ["account_signup:2", "signup:1"]
