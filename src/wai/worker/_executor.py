"""Runs one attempt: decode args, call the handler under its deadline, decide the outcome.

While tracing (:mod:`wai._tracing`) the attempt runs in its ``process`` span, the
handler's own spans nest under it, and the outcome carries the span's context for the
follow-ups it enqueues.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from wai._context import AttemptState, Job
from wai._job import JobRow, JobState
from wai._kinds import decode_args
from wai._outcomes import Outcome, decide
from wai._registry import Registry
from wai._text import storable
from wai._tracing import otel
from wai.errors import SerializationError

__all__ = ["INTERRUPTED", "execute", "interrupted_outcome", "shutdown_outcome"]

logger = logging.getLogger("wai.worker")


def _failed(row: JobRow, message: str) -> Outcome:
    return Outcome(
        job_id=row.id,
        run_lease=row.run_lease,
        state=JobState.FAILED,
        event="exhausted",
        error=storable(message),  # may quote an exception's text
        terminal=True,
    )


class _DeadlineExceeded(Exception):
    """The attempt outlived its deadline (unlike a ``TimeoutError`` the handler raised)."""


def _consume(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()  # retrieved: asyncio logs no "never retrieved"


async def _call(
    fn: Any,
    job: Job[Any],
    state: AttemptState,
    is_async: bool,
    threads: ThreadPoolExecutor,
    deadline: float | None,
) -> Any:
    if is_async:
        if deadline is None:
            return await fn(job)
        scope = asyncio.timeout(deadline)
        try:
            async with scope:
                return await fn(job)
        except TimeoutError:
            if scope.expired():
                raise _DeadlineExceeded from None
            raise  # the handler's own TimeoutError: an ordinary failure
    # As asyncio.to_thread does: a def handler sees the context variables an async one would.
    ctx = contextvars.copy_context()
    call = threads.submit(ctx.run, fn, job)
    fut = asyncio.wrap_future(call)
    if deadline is None:
        return await fut
    # A thread cannot be interrupted: past the deadline the attempt is recorded as
    # failed, ``is_cancelled()`` turns true, and the thread's late result is ignored.
    done, _ = await asyncio.wait({fut}, timeout=deadline)
    if not done:
        fut.add_done_callback(_consume)  # the late result or error goes nowhere
        # Still queued behind busy threads? Then it never starts: its attempt is over.
        # Running? Then its thread stays busy past the attempt: the caller keeps the
        # slot taken until the thread ends (AttemptState.overrun).
        if not call.cancel():
            state.overrun = call
        raise _DeadlineExceeded
    return fut.result()


async def execute(
    row: JobRow,
    state: AttemptState,
    registry: Registry,
    threads: ThreadPoolExecutor,
    default_deadline: float | None,
) -> Outcome:
    """Run the attempt of ``row`` and return its outcome (never raises, except cancellation)."""
    if state.traced and otel is not None:
        # The context is carried only where a follow-up or an outbox row can store it.
        with otel.processing(row, carry=registry.has_specs(row.kind)) as traced:
            state.trace = traced.trace
            outcome = await _execute(row, state, registry, threads, default_deadline, traced.failed)
            traced.finished(outcome)
        if traced.trace is None:
            return outcome
        return dataclasses.replace(outcome, trace=traced.trace)
    return await _execute(row, state, registry, threads, default_deadline, None)


async def _execute(
    row: JobRow,
    state: AttemptState,
    registry: Registry,
    threads: ThreadPoolExecutor,
    default_deadline: float | None,
    failed: Callable[[BaseException], None] | None,
) -> Outcome:
    """:func:`execute`; ``failed`` hears of the exception that failed the attempt, if any."""
    task = registry.tasks.get(row.kind)
    if task is None:
        return _failed(
            row,
            f"unknown job kind {row.kind!r}: no task is registered for it in this worker; "
            "register one with @client.task(...) or route the kind to another queue",
        )
    try:
        args = decode_args(task.args_type, row.args)
    except SerializationError as exc:
        if failed is not None:
            failed(exc)
        return _failed(row, f"undecodable args for job {row.id} ({row.kind!r}): {exc}")
    state.caller_owned = task.completion == "caller"
    job: Job[Any] = Job(row, args, state)
    deadline = task.deadline if task.deadline is not None else default_deadline
    try:
        result = await _call(task.fn, job, state, task.is_async, threads, deadline)
    except _DeadlineExceeded:
        state.abandon()
        timeout_error = TimeoutError(f"deadline of {deadline:g}s exceeded")
        if failed is not None:
            failed(timeout_error)
        return _with_progress(
            decide(
                job_id=row.id,
                run_lease=row.run_lease,
                attempt=row.attempt,
                max_attempts=row.max_attempts,
                exc=timeout_error,
            ),
            state,
        )
    # Shutdown or interrupt: _run_attempt decides that attempt's outcome.
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if failed is not None:
            failed(exc)
        return _with_progress(_decide_exc(row, exc), state)
    if state.caller_owned:
        return _caller_outcome(row, state)
    return _with_progress(
        decide(
            job_id=row.id,
            run_lease=row.run_lease,
            attempt=row.attempt,
            max_attempts=row.max_attempts,
            result=result,
            callback_id=state.callback_id,
        ),
        state,
    )


def _caller_outcome(row: JobRow, state: AttemptState) -> Outcome:
    """What a ``completion="caller"`` handler that returned leaves: its own completion
    (which the runtime confirms), or a failed attempt when it never completed the job."""
    if state.caller_completed:
        return Outcome(
            job_id=row.id,
            run_lease=row.run_lease,
            state=JobState.COMPLETED,
            event="completed",
            by_caller=True,
            trace=state.trace,
        )
    missing = RuntimeError(
        f"the handler of {row.kind!r} (completion='caller') returned without completing the "
        "job: call await job.complete_in(tx) in the transaction that writes its rows"
    )
    return _with_progress(_decide_exc(row, missing), state)


def _decide_exc(row: JobRow, exc: BaseException) -> Outcome:
    return decide(
        job_id=row.id,
        run_lease=row.run_lease,
        attempt=row.attempt,
        max_attempts=row.max_attempts,
        exc=exc,
    )


def shutdown_outcome(row: JobRow, state: AttemptState) -> Outcome:
    """The outcome of an attempt cut short by shutdown: retry at once, attempt refunded."""
    return Outcome(
        job_id=row.id,
        run_lease=row.run_lease,
        state=JobState.AVAILABLE,
        event="snoozed",
        delay=0.0,
        attempt_delta=-1,
        error="worker shut down before the attempt finished",
        progress=state.current_progress_json(),
        trace=state.trace,
    )


#: The error of an attempt stopped at once by :meth:`wai.worker.Runtime.interrupt`.
INTERRUPTED = "worker interrupted: stopped at once (a second Ctrl-C) before the attempt finished"


def interrupted_outcome(row: JobRow, state: AttemptState) -> Outcome:
    """The outcome of an attempt the worker stopped without waiting: retryable now.

    The attempt counts (it ran, and may have had effects) and its error is recorded,
    but it never exhausts the job: an operator's Ctrl-C is not the job's failure.
    """
    return Outcome(
        job_id=row.id,
        run_lease=row.run_lease,
        state=JobState.RETRYABLE,
        event="retried",
        delay=0.0,
        error=INTERRUPTED,
        progress=state.current_progress_json(),
        trace=state.trace,
    )


def _with_progress(outcome: Outcome, state: AttemptState) -> Outcome:
    # The finalize statement clears a completed job's progress: nothing to carry.
    if outcome.state == JobState.COMPLETED:
        return outcome
    progress = state.current_progress_json()
    return outcome if progress is None else dataclasses.replace(outcome, progress=progress)
