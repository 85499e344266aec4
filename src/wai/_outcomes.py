"""Attempt outcomes: what a finished attempt does to its job (pure, no I/O)."""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from wai._job import JobRow, JobState
from wai._json import loads
from wai._results import CallbackToken, Cancel, RetryAfter, Snooze, WaitForCallback
from wai._retry import backoff
from wai._slots import positional_constructor
from wai._text import storable
from wai.errors import FollowUpError, TerminalError

__all__ = [
    "RESCUE_ERRORS",
    "Outcome",
    "Rescue",
    "decide",
    "decide_rescue",
    "describe_exception",
    "error_timestamp",
    "expected_row",
    "stamped",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """A guarded transition of one running attempt, applied by the finalizer.

    ``event`` names the lifecycle outcome (completed, retried, exhausted,
    cancelled, snoozed, waiting_for_callback) that hooks and follow-up specs key
    on. ``followup_failure`` marks the outcome that records a failed follow-up
    spec; if its own specs fail too, the job is left for rescue. ``callback_id``
    is the registered callback a park (``waiting_for_callback``) must still hold.

    ``at`` and ``run_at``, when set, are the timestamps the write uses instead of the
    server's ``now()`` (``finalized_at``, the error entry's ``at``, the next ``run_at``):
    set by :func:`stamped` on an outcome whose follow-ups are planned before the write,
    so that the row the closures see is the row that commits. ``unwritable`` marks the
    failed attempt that records why the database refused the attempt's own outcome.
    ``by_caller`` marks a completion the handler wrote in its own transaction
    (``job.complete_in``): the worker confirms it, and writes nothing.

    ``trace`` is the trace context of the span that produced the outcome (the attempt's
    span, :mod:`wai._otel`), as the propagators wrote it: the follow-ups the outcome
    enqueues store it, possibly after that span ended. None when nothing is traced. It
    takes no part in comparisons.
    """

    job_id: int
    run_lease: int
    state: JobState
    event: str
    delay: float | None = None
    error: str | None = None
    terminal: bool = False
    attempt_delta: int = 0
    progress: str | None = None
    reason: str | None = None
    followup_failure: bool = False
    callback_id: UUID | None = None
    at: datetime | None = None
    run_at: datetime | None = None
    unwritable: bool = False
    by_caller: bool = False
    trace: Mapping[str, str] | None = field(default=None, compare=False)


_new_outcome = positional_constructor(Outcome)


def _completed(job_id: int, run_lease: int) -> Outcome:
    """``Outcome(job_id=..., run_lease=..., state=COMPLETED, event="completed")``, the
    outcome of nearly every attempt, built at a third of the keyword constructor's cost."""
    return _new_outcome(
        job_id, run_lease, JobState.COMPLETED, "completed",
        None, None, False, 0, None, None, False, None, None, None, False, False, None,
    )  # fmt: skip


def describe_exception(exc: BaseException, *, limit: int = 10) -> str:
    """``"<Type>: <message>"`` plus the last ``limit`` traceback lines.

    An exception whose ``str()`` raises is described by its type. The text is made
    storable (:func:`wai._text.storable`): a NUL byte in the message
    is recorded as ``\\x00`` and a lone surrogate as its backslash escape, so the
    error is kept, readable, instead of failing the write of the job's outcome.
    """
    try:
        head = f"{type(exc).__name__}: {exc}"
    except Exception:  # its __str__ raises: the type still says something
        head = f"{type(exc).__name__}: <str() of the exception raised>"
    if isinstance(exc, FollowUpError):
        return storable(head)  # names the spec and the closure's exception; no wai frames
    tb = traceback.format_exception(exc)
    # The last line repeats ``head``: keep the frames before it.
    lines = "".join(tb).rstrip().splitlines()[-limit - 1 : -1]
    return storable(head + ("\n" + "\n".join(lines) if lines else ""))


def _retry_delay(attempt: int, max_attempts: int, delay: float | None = None) -> float | None:
    """Seconds before the next attempt after a failed ``attempt``; None: it was the last.

    The one rule for a spent attempt, a handler's failure or a rescue alike: the last
    attempt fails the job, any other retries after ``delay`` or the backoff.
    """
    if attempt >= max_attempts:
        return None
    return backoff(attempt) if delay is None else delay


def _fail_or_retry(
    job_id: int, run_lease: int, attempt: int, max_attempts: int, error: str, delay: float | None
) -> Outcome:
    retry_in = _retry_delay(attempt, max_attempts, delay)
    if retry_in is None:
        return Outcome(
            job_id=job_id,
            run_lease=run_lease,
            state=JobState.FAILED,
            event="exhausted",
            error=error,
        )
    return Outcome(
        job_id=job_id,
        run_lease=run_lease,
        state=JobState.RETRYABLE,
        event="retried",
        error=error,
        delay=retry_in,
    )


def decide(
    *,
    job_id: int,
    run_lease: int,
    attempt: int,
    max_attempts: int,
    result: Any = None,
    exc: BaseException | None = None,
    callback_id: UUID | None = None,
) -> Outcome:
    """Map a handler's return value or exception to the outcome of its attempt.

    ``callback_id`` is the callback the attempt registered and has not consumed:
    ``WaitForCallback`` parks only with a token of that callback.
    """
    if exc is not None:
        if isinstance(exc, TerminalError):
            return Outcome(
                job_id=job_id,
                run_lease=run_lease,
                state=JobState.FAILED,
                event="exhausted",
                error=describe_exception(exc),
                terminal=True,
            )
        return _fail_or_retry(
            job_id, run_lease, attempt, max_attempts, describe_exception(exc), None
        )
    if result is None:
        return _completed(job_id, run_lease)
    if isinstance(result, RetryAfter):
        return _fail_or_retry(
            job_id,
            run_lease,
            attempt,
            max_attempts,
            f"RetryAfter({result.seconds:g}s) requested by handler",
            result.seconds,
        )
    if isinstance(result, Snooze):
        return Outcome(
            job_id=job_id,
            run_lease=run_lease,
            state=JobState.SCHEDULED,
            event="snoozed",
            delay=result.seconds,
            attempt_delta=-1,  # the claim counted one; a snooze gives it back
        )
    if isinstance(result, Cancel):
        # Cancel checks its reason when built; escaped again for one changed after that
        reason = storable(result.reason)
        return Outcome(
            job_id=job_id,
            run_lease=run_lease,
            state=JobState.CANCELLED,
            event="cancelled",
            error=f"cancelled: {reason}",
            reason=reason,
        )
    if isinstance(result, WaitForCallback):
        return _park(job_id, run_lease, result.token, callback_id)
    return Outcome(
        job_id=job_id,
        run_lease=run_lease,
        state=JobState.FAILED,
        event="exhausted",
        terminal=True,
        error=(
            f"handler returned {type(result).__name__}; return None, wai.RetryAfter, "
            "wai.Snooze, wai.Cancel or wai.WaitForCallback, or raise"
        ),
    )


def _park(job_id: int, run_lease: int, token: object, callback_id: UUID | None) -> Outcome:
    problem: str | None = None
    if not isinstance(token, CallbackToken):
        problem = f"WaitForCallback needs a wai.CallbackToken, got {type(token).__name__}"
    elif (token.job_id, token.run_lease) != (job_id, run_lease):
        problem = (
            f"WaitForCallback got the token of job {token.job_id} (run lease "
            f"{token.run_lease}), not of this attempt (job {job_id}, run lease {run_lease})"
        )
    elif callback_id is None or token.id != callback_id:
        problem = (
            "WaitForCallback without a registered callback: call "
            "`token = await job.register_callback(...)` in this attempt and return "
            "wai.WaitForCallback(token) (a callback consumed by wait_for_callback or "
            "replaced by a later register_callback cannot park the job)"
        )
    if problem is not None:
        return Outcome(
            job_id=job_id,
            run_lease=run_lease,
            state=JobState.FAILED,
            event="exhausted",
            terminal=True,
            error=problem,
        )
    assert isinstance(token, CallbackToken)
    return Outcome(
        job_id=job_id,
        run_lease=run_lease,
        state=JobState.WAITING_EXTERNAL,
        event="waiting_for_callback",
        callback_id=token.id,
    )


#: The error entry a rescue records, by the reason the attempt was rescued for.
RESCUE_ERRORS = {
    "stale_heartbeat": "heartbeat stale: worker presumed dead",
    "deadline_exceeded": "deadline exceeded: rescued by maintenance",
    "callback_timeout": "callback timed out",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Rescue:
    """What maintenance does to an attempt it closes (see :func:`decide_rescue`)."""

    job_id: int
    state: JobState
    delay: float | None
    error: str
    reason: str


def decide_rescue(*, job_id: int, attempt: int, max_attempts: int, reason: str) -> Rescue:
    """Close an abandoned attempt: retryable after :func:`wai._retry.backoff`, or failed.

    ``reason`` is ``stale_heartbeat`` (its worker is presumed dead),
    ``deadline_exceeded`` or ``callback_timeout``. Like a handler's exception, a
    rescue spends the attempt: the last one fails the job.
    """
    retry_in = _retry_delay(attempt, max_attempts)
    state = JobState.FAILED if retry_in is None else JobState.RETRYABLE
    return Rescue(
        job_id=job_id, state=state, delay=retry_in, error=RESCUE_ERRORS[reason], reason=reason
    )


def stamped(outcome: Outcome, at: datetime) -> Outcome:
    """``outcome`` written at ``at`` (server time): its next ``run_at`` fixed from its delay.

    Raises :class:`OverflowError` when the delay puts ``run_at`` beyond what a
    datetime holds.
    """
    run_at = None if outcome.delay is None else at + timedelta(seconds=outcome.delay)
    return dataclasses.replace(outcome, at=at, run_at=run_at)


def error_timestamp(at: datetime) -> str:
    """The ``at`` of an error entry written at ``at``, as ``job_finalize_many`` formats it."""
    return at.astimezone(UTC).isoformat(timespec="microseconds")


_KEEPS_CALLBACK = JobState.WAITING_EXTERNAL


def expected_row(
    claimed: JobRow, outcome: Outcome, *, callback_timeout_at: datetime | None = None
) -> JobRow:
    """The row ``job_finalize_many`` commits when it applies a :func:`stamped` ``outcome``.

    ``claimed`` is the row as the attempt claimed it; ``callback_timeout_at`` the
    timeout its callback registration set (for a park). The write changes nothing
    else, so a row that commits otherwise (a callback heartbeat moved the timeout,
    an operator touched it) shows a mismatch, and the caller plans again from the
    committed row.
    """
    assert outcome.at is not None, "expected_row needs a stamped outcome"
    at = outcome.at
    errors = claimed.errors
    if outcome.error is not None:
        entry: dict[str, Any] = {
            "error": outcome.error,
            "attempt": claimed.attempt,
            "at": error_timestamp(at),
        }
        if outcome.terminal:
            entry["terminal"] = True
        errors = (*errors, entry)
    state = outcome.state
    if state is JobState.COMPLETED:
        progress = None
    elif outcome.progress is not None:
        progress = loads(outcome.progress)
    else:
        progress = claimed.progress
    parked = state is _KEEPS_CALLBACK
    return dataclasses.replace(
        claimed,
        state=state,
        attempt=claimed.attempt + outcome.attempt_delta,
        run_at=claimed.run_at if outcome.run_at is None else outcome.run_at,
        finalized_at=at if state.is_terminal else None,
        heartbeat_at=None,
        deadline_at=None,
        errors=errors,
        progress=progress,
        callback_id=outcome.callback_id if parked else None,
        callback_timeout_at=callback_timeout_at if parked else None,
        callback_result=None,
    )
