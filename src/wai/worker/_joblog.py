"""Log lines for written attempt outcomes (logger ``wai.jobs``), safe and cheap.

Logged once the finalizer has written a batch, so that the line tells what the job's
row now says:

- a failed attempt that will run again: INFO, with the error's first line and when
  the job runs next;
- a failed attempt with no attempt left (``exhausted``), or a terminal error
  (``discarded``: :class:`wai.TerminalError`, an unknown kind, undecodable args):
  WARNING, and whether the job moved to the dead-letter queue;
- a cancellation the handler returned: INFO; a completion, a snooze, a park: DEBUG.

Every line carries ``extra`` fields for structured handlers: ``job_id``, ``kind``,
``queue``, ``attempt``, ``max_attempts``, ``outcome`` (and ``dlq_reason`` for a job
moved to the dead-letter queue). Nothing is done for a batch
when its levels are disabled, and a failing handler, filter or formatter costs the
log line only, never the batch.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from wai._context import AttemptState
from wai._job import JobRow, JobState
from wai._logging import emit, job_extra
from wai._outcomes import Outcome

__all__ = ["log_written", "logger"]

logger = logging.getLogger("wai.jobs")


def log_written(
    written: Sequence[tuple[Outcome, AttemptState]],
    rows: Sequence[JobRow],
    dead_lettered: Mapping[int, str],
) -> None:
    """Log the outcomes of one written batch; ``rows`` are the changed rows when read."""
    enabled = logger.isEnabledFor
    if not enabled(logging.INFO):
        if not enabled(logging.WARNING):
            return
        if not any(o.state is JobState.FAILED for o, _ in written):
            return
    by_id = {row.id: row for row in rows} if rows else None
    for outcome, state in written:
        level = _LEVELS.get(outcome.state, logging.DEBUG)
        if not enabled(level):
            continue
        row = None if by_id is None else by_id.get(outcome.job_id)
        if by_id is not None and row is None:
            # the batch read its rows and this one was not among them: the attempt had
            # been rescued or cancelled meanwhile, and the write matched nothing
            emit(
                logger,
                logging.DEBUG,
                "job %s (%s) attempt %s/%s: outcome %s discarded: the attempt was no "
                "longer current (rescued or cancelled meanwhile)",
                outcome.job_id,
                state.kind,
                state.attempt,
                state.max_attempts,
                outcome.event,
                extra=job_extra(state.row, outcome=outcome.event),
            )
            continue
        try:
            dead = dead_lettered.get(outcome.job_id)
            message, args = _describe(outcome, state, row, dead)
        except Exception:  # noqa: S112 - a bug (an overflowing delay) costs the line only
            continue
        extra = job_extra(state.row, outcome=outcome.event)
        if dead is not None:
            extra["dlq_reason"] = dead
        emit(logger, level, message, *args, extra=extra)


_LEVELS = {
    JobState.RETRYABLE: logging.INFO,
    JobState.FAILED: logging.WARNING,
    JobState.CANCELLED: logging.INFO,
}


def _describe(
    outcome: Outcome, state: AttemptState, row: JobRow | None, dead: str | None
) -> tuple[str, tuple[Any, ...]]:
    head = "job %s (%s, queue %s) attempt %s/%s"
    facts: tuple[Any, ...] = (
        outcome.job_id,
        state.kind,
        state.row.queue,
        state.attempt,
        state.max_attempts,
    )
    error = _first_line(outcome.error)
    match outcome.state:
        case JobState.RETRYABLE:
            delay = outcome.delay or 0.0
            at = row.run_at if row is not None else outcome.run_at
            if at is None:
                at = datetime.now(UTC) + timedelta(seconds=delay)
            return head + " failed: %s; retry in %.1f s (at %s)", (*facts, error, delay, _iso(at))
        case JobState.FAILED:
            fate = "discarded (terminal error, no retry)" if outcome.terminal else "exhausted"
            if dead is not None:
                fate += f"; moved to the dead-letter queue ({dead})"
            return head + " failed: %s; %s", (*facts, error, fate)
        case JobState.CANCELLED:
            return head + " cancelled: %s", (*facts, outcome.reason or "")
        case JobState.COMPLETED:
            took = (state.finished or state.started) - state.started
            return head + " completed in %.3f s", (*facts, took)
        case _:
            then = f"; {error}" if error else ""
            return head + " %s (now %s)%s", (*facts, outcome.event, outcome.state.value, then)


def _first_line(text: str | None) -> str:
    if not text:
        return ""
    stripped = text.strip()
    return stripped.splitlines()[0] if stripped else ""


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
