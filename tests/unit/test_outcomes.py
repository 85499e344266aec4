from __future__ import annotations

import math
import uuid
from typing import Any
from uuid import UUID

import pytest

from wai._job import JobState
from wai._outcomes import RESCUE_ERRORS, Outcome, decide, decide_rescue, describe_exception
from wai._results import CallbackToken, Cancel, RetryAfter, Snooze, WaitForCallback
from wai.errors import TerminalError, ValidationError


def run(result: Any = None, *, exc: BaseException | None = None, attempt: int = 1) -> Outcome:
    return decide(job_id=11, run_lease=3, attempt=attempt, max_attempts=3, result=result, exc=exc)


def raised(exc: BaseException) -> BaseException:
    """``exc`` with a real traceback, as a handler would leave it."""

    def handler() -> None:
        raise exc

    try:
        handler()
    except BaseException as caught:
        return caught
    raise AssertionError("unreachable")


def test_none_completes() -> None:
    out = run(None)
    assert out.state == JobState.COMPLETED
    assert out.event == "completed"
    assert out.error is None
    assert out.delay is None
    assert out.attempt_delta == 0
    assert (out.job_id, out.run_lease) == (11, 3)
    # built by the positional fast path: every other field at its declared default
    assert out == Outcome(job_id=11, run_lease=3, state=JobState.COMPLETED, event="completed")
    assert out.trace is None


def test_retry_after_with_attempts_left_retries_after_that_delay() -> None:
    out = run(RetryAfter(42.5), attempt=2)
    assert out.state == JobState.RETRYABLE
    assert out.event == "retried"
    assert out.delay == 42.5
    assert out.error is not None
    assert "RetryAfter(42.5s)" in out.error
    assert not out.terminal


def test_retry_after_at_the_last_attempt_fails_exhausted() -> None:
    out = run(RetryAfter(10), attempt=3)
    assert out.state == JobState.FAILED
    assert out.event == "exhausted"
    assert out.delay is None
    assert out.error is not None
    assert "RetryAfter" in out.error


def test_snooze_schedules_without_consuming_the_attempt() -> None:
    out = run(Snooze(30), attempt=3)
    assert out.state == JobState.SCHEDULED
    assert out.event == "snoozed"
    assert out.delay == 30
    assert out.attempt_delta == -1
    assert out.error is None


def test_cancel_cancels_with_the_reason() -> None:
    out = run(Cancel("customer left"))
    assert out.state == JobState.CANCELLED
    assert out.event == "cancelled"
    assert out.reason == "customer left"
    assert out.error is not None
    assert "customer left" in out.error


def test_cancel_has_a_default_reason() -> None:
    assert run(Cancel()).reason == "cancelled by handler"


@pytest.mark.parametrize("attempt", [1, 2])
def test_exception_with_attempts_left_retries_with_backoff(attempt: int) -> None:
    out = run(exc=raised(ValueError("boom")), attempt=attempt)
    assert out.state == JobState.RETRYABLE
    assert out.event == "retried"
    assert out.delay is not None
    assert 2.0**attempt <= out.delay <= 1.25 * 2.0**attempt
    assert out.error is not None
    assert out.error.startswith("ValueError: boom")
    assert "handler" in out.error  # the traceback names the raising function
    assert not out.terminal


@pytest.mark.parametrize("attempt", [3, 4])
def test_exception_at_the_last_attempt_fails(attempt: int) -> None:
    out = run(exc=raised(RuntimeError("still down")), attempt=attempt)
    assert out.state == JobState.FAILED
    assert out.event == "exhausted"
    assert out.delay is None
    assert out.error is not None
    assert out.error.startswith("RuntimeError: still down")
    assert not out.terminal


def test_terminal_error_fails_at_once() -> None:
    out = run(exc=raised(TerminalError("card declined")), attempt=1)
    assert out.state == JobState.FAILED
    assert out.event == "exhausted"
    assert out.terminal
    assert out.error is not None
    assert out.error.startswith("TerminalError: card declined")


def test_exception_wins_over_result() -> None:
    assert run(None, exc=ValueError("x")).state == JobState.RETRYABLE


@pytest.mark.parametrize("result", [42, "ok", True, {"status": "done"}, [1], object()])
def test_unexpected_return_value_fails_with_a_clear_error(result: object) -> None:
    out = run(result)
    assert out.state == JobState.FAILED
    assert out.terminal
    assert out.error is not None
    assert f"handler returned {type(result).__name__}" in out.error
    assert "return None" in out.error


def test_describe_exception_without_traceback() -> None:
    assert describe_exception(KeyError("k")) == "KeyError: 'k'"


def test_describe_exception_limits_traceback_lines() -> None:
    text = describe_exception(raised(ValueError("v")), limit=1)
    assert text.splitlines()[0] == "ValueError: v"
    assert len(text.splitlines()) == 2


@pytest.mark.parametrize("seconds", [-1, math.nan, "5", None])
def test_retry_after_and_snooze_reject_bad_seconds(seconds: Any) -> None:
    with pytest.raises(ValidationError, match=r"RetryAfter\(seconds\)"):
        RetryAfter(seconds)
    with pytest.raises(ValidationError, match=r"Snooze\(seconds\)"):
        Snooze(seconds)


def test_wait_for_callback_parks_with_the_registered_callback() -> None:
    cid = uuid.uuid4()
    token = CallbackToken(id=cid, job_id=11, run_lease=3)
    out = decide(
        job_id=11,
        run_lease=3,
        attempt=1,
        max_attempts=3,
        result=WaitForCallback(token),
        callback_id=cid,
    )
    assert (out.state, out.event, out.callback_id, out.error) == (
        JobState.WAITING_EXTERNAL,
        "waiting_for_callback",
        cid,
        None,
    )


@pytest.mark.parametrize(
    ("token", "registered", "message"),
    [
        (CallbackToken(id=UUID(int=1), job_id=11, run_lease=3), None, "without a registered"),
        (CallbackToken(id=UUID(int=1), job_id=11, run_lease=3), UUID(int=2), "without a regist"),
        (CallbackToken(id=UUID(int=1), job_id=12, run_lease=3), UUID(int=1), "token of job 12"),
        (CallbackToken(id=UUID(int=1), job_id=11, run_lease=2), UUID(int=1), "run lease 2"),
        ("not a token", UUID(int=1), "needs a wai.CallbackToken"),
    ],
)
def test_wait_for_callback_without_its_callback_fails_terminally(
    token: Any, registered: UUID | None, message: str
) -> None:
    out = decide(
        job_id=11,
        run_lease=3,
        attempt=1,
        max_attempts=3,
        result=WaitForCallback(token),
        callback_id=registered,
    )
    assert (out.state, out.event, out.terminal) == (JobState.FAILED, "exhausted", True)
    assert out.error is not None
    assert message in out.error


@pytest.mark.parametrize("reason", sorted(RESCUE_ERRORS))
def test_rescue_with_attempts_left_retries_after_the_backoff(reason: str) -> None:
    rescue = decide_rescue(job_id=5, attempt=3, max_attempts=4, reason=reason)
    assert rescue.state is JobState.RETRYABLE
    assert rescue.delay is not None
    assert 8.0 <= rescue.delay <= 10.0  # backoff(3): 2**3 s plus up to 25 %
    assert (rescue.job_id, rescue.reason, rescue.error) == (5, reason, RESCUE_ERRORS[reason])


@pytest.mark.parametrize("reason", sorted(RESCUE_ERRORS))
def test_rescue_of_the_last_attempt_fails_the_job(reason: str) -> None:
    rescue = decide_rescue(job_id=5, attempt=4, max_attempts=4, reason=reason)
    assert (rescue.state, rescue.delay) == (JobState.FAILED, None)
    assert rescue.error == RESCUE_ERRORS[reason]


def test_rescue_errors_say_why() -> None:
    assert RESCUE_ERRORS == {
        "stale_heartbeat": "heartbeat stale: worker presumed dead",
        "deadline_exceeded": "deadline exceeded: rescued by maintenance",
        "callback_timeout": "callback timed out",
    }
