"""The signup job, run for real on a fresh schema per test."""

import wai
from wai.testing import assert_enqueued, drain, run_job

from myapp import SENT, SendWelcome, Signup


async def test_a_signup_enqueues_its_welcome(wai_client: wai.AsyncClient) -> None:
    run = await run_job(wai_client, Signup(user_id=1, email="ada@example.com"))
    assert run.event == "completed"
    assert_enqueued(run, SendWelcome, count=1, args=SendWelcome(email="ada@example.com"))
    assert SENT == []  # enqueued, not run: run_job runs one job


async def test_an_invalid_email_fails_for_good(wai_client: wai.AsyncClient) -> None:
    run = await run_job(wai_client, Signup(user_id=2, email="nope"))
    assert (run.event, run.state) == ("exhausted", wai.JobState.FAILED)
    assert run.error is not None
    assert "invalid email" in run.error
    assert_enqueued(run, SendWelcome, count=0)


async def test_the_whole_flow(wai_client: wai.AsyncClient) -> None:
    await wai_client.insert(Signup(user_id=3, email="grace@example.com"))
    report = await drain(wai_client)  # every queue of the registry: signup, mail
    assert report.kinds == ["signup", "send_welcome"]
    assert [job.state for job in report] == ["completed", "completed"]
    assert SENT == ["grace@example.com"]
