"""Follow-up specs: closures that turn a committed outcome into jobs to enqueue (pure, no I/O)."""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wai._inserts import EnqueueRequest, NewJob, build_args_job, build_job
from wai._job import JobRow
from wai._kinds import decode_args
from wai._outcomes import Outcome
from wai._tracing import otel
from wai.errors import FollowUpError, WaiError

if TYPE_CHECKING:
    from wai._registry import Registry

__all__ = [
    "OUTCOMES",
    "Applied",
    "FollowUpPlan",
    "RescueReason",
    "Spec",
    "closure_args",
    "decode_for",
    "error_text",
    "evaluate",
    "plan_followups",
    "plan_row",
]

#: The outcomes a follow-up can be registered for, in SPEC order.
OUTCOMES = ("completed", "retried", "exhausted", "cancelled", "waiting_for_callback", "rescued")


class RescueReason(enum.StrEnum):
    """Why maintenance rescued an attempt."""

    STALE_HEARTBEAT = "stale_heartbeat"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    CALLBACK_TIMEOUT = "callback_timeout"


@dataclass(frozen=True, slots=True, kw_only=True)
class Spec:
    """One registered follow-up: ``fn`` runs on ``outcome`` of jobs of ``kind``.

    ``with_request`` marks the ``_with`` form, whose closure returns a
    :class:`wai.EnqueueRequest` instead of bare args. ``name`` is the lineage key
    (default: the closure's qualified name, made unique per kind and outcome).
    """

    kind: str
    outcome: str
    fn: Callable[..., Any]
    with_request: bool
    name: str


def default_name(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of a closure."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def closure_args(outcome: str, args: Any, job: JobRow, detail: dict[str, Any]) -> tuple[Any, ...]:
    """The positional arguments a closure of ``outcome`` receives (SPEC §4.1)."""
    if outcome == "retried":
        return (args, job, detail["error"], job.attempt, job.run_at)
    if outcome == "exhausted":
        return (args, job, detail["error"], job.attempt)
    if outcome == "cancelled":
        return (args, job, detail["reason"])
    if outcome == "rescued":
        return (args, job, RescueReason(detail["reason"]))
    return (args, job)


def evaluate(
    spec: Spec,
    args: Any,
    job: JobRow,
    detail: dict[str, Any],
    *,
    default_queue: Callable[[str], str | None],
    default_max_attempts: Callable[[str], int | None],
) -> NewJob:
    """Run ``spec``'s closure and validate what it returned into a row with lineage.

    The follow-up's queue and ``max_attempts`` default to those its kind is
    registered with here, as for any insert. Raises :class:`wai.FollowUpError`
    naming the spec when the closure raises, returns the wrong type, or returns
    something that cannot be inserted.
    """
    try:
        result = spec.fn(*closure_args(spec.outcome, args, job, detail))
    # Cancellation stops the task; it is not the spec's failure.
    except asyncio.CancelledError:
        raise
    except BaseException as exc:  # user code: even a KeyboardInterrupt costs only its job
        raise FollowUpError(
            f"follow-up spec {spec.name!r} ({spec.kind} → {spec.outcome}) raised {_named(exc)}"
        ) from exc
    if inspect.isawaitable(result):
        # Closed, so the coroutine never awaited raises no RuntimeWarning later.
        close = getattr(result, "close", None)
        if callable(close):
            close()
        raise FollowUpError(
            f"follow-up spec {spec.name!r} returned an awaitable: closures must be plain functions"
        )
    if spec.with_request:
        if not isinstance(result, EnqueueRequest):
            raise FollowUpError(
                f"follow-up spec {spec.name!r} must return wai.EnqueueRequest, "
                f"got {type(result).__name__}"
            )
    elif result is None or isinstance(result, EnqueueRequest | bool | int | float | str):
        raise FollowUpError(
            f"follow-up spec {spec.name!r} must return job args "
            f"(a dataclass, pydantic model, msgspec struct), got {type(result).__name__}"
        )
    trigger = (job.id, job.run_lease, spec.outcome, spec.name)
    try:
        if spec.with_request:
            return build_job(
                result,
                default_queue=default_queue,
                default_max_attempts=default_max_attempts,
                trigger=trigger,
            )
        return build_args_job(
            result,
            default_queue=default_queue,
            default_max_attempts=default_max_attempts,
            trigger=trigger,
        )
    except Exception as exc:  # whatever the returned value does while it is built
        raise FollowUpError(
            f"follow-up spec {spec.name!r} returned bad args: {error_text(exc)}"
        ) from exc


def _named(exc: BaseException) -> str:
    """``"<Type>: <message>"``, even for an exception whose ``str()`` itself raises."""
    try:
        message = str(exc)
    except Exception:
        message = "<the exception's message could not be read>"
    return f"{type(exc).__name__}: {message}"


def error_text(exc: BaseException) -> str:
    """A readable account of ``exc``: wai's own message, else ``"<Type>: <message>"``."""
    return str(exc) if isinstance(exc, WaiError) else _named(exc)


@dataclass(slots=True)
class FollowUpPlan:
    """Follow-up rows to insert with a batch of transitions, and the jobs whose specs failed."""

    jobs: list[NewJob] = field(default_factory=list[NewJob])
    failed: dict[int, FollowUpError] = field(default_factory=dict[int, FollowUpError])


@dataclass(slots=True)
class Applied:
    """What one application of outcomes committed.

    ``rows`` are the post-transition rows that changed (stale attempts are absent; empty
    when the batch was written without reading rows back), ``written`` the ids of every
    job whose outcome was written (in both cases), ``rejected`` the outcomes rolled back
    because a follow-up spec failed, each with the error naming the spec, and
    ``dead_lettered`` the failed jobs moved to the dead-letter queue, with reason.
    """

    rows: list[JobRow] = field(default_factory=list[JobRow])
    written: set[int] = field(default_factory=set[int])
    rejected: list[tuple[Outcome, FollowUpError]] = field(
        default_factory=list[tuple[Outcome, FollowUpError]]
    )
    dead_lettered: dict[int, str] = field(default_factory=dict[int, str])

    def merge(self, other: Applied) -> None:
        """Add what ``other``, applied after this, committed and rejected."""
        self.rows.extend(other.rows)
        self.written |= other.written
        self.rejected.extend(other.rejected)
        self.dead_lettered.update(other.dead_lettered)


def decode_for(registry: Registry, row: JobRow) -> Any:
    """``row.args`` decoded into the registered args type (a dict when none is known)."""
    return decode_args(registry.args_type_of(row.kind), row.args)


def plan_row(registry: Registry, row: JobRow, outcome: Outcome) -> list[NewJob]:
    """The follow-ups of ``row``'s committed ``outcome``: its specs' results, in order.

    Raises :class:`wai.FollowUpError` naming the cause when the args do not decode or a
    spec fails: whatever a closure or the value it returned raises, never anything else.
    While tracing, each stores the trace context of the span that produced the outcome:
    ``outcome.trace`` (an attempt's), else the current span's (a callback resolution's).
    """
    specs = registry.specs_for(row.kind, outcome.event)
    if not specs:
        return []
    try:
        args = decode_for(registry, row)
    except Exception as exc:
        raise FollowUpError(
            f"follow-ups of {row.kind} → {outcome.event}: args do not decode: {error_text(exc)}"
        ) from exc
    detail = {"error": outcome.error or "", "reason": outcome.reason or ""}
    jobs = [
        evaluate(
            spec,
            args,
            row,
            detail,
            default_queue=registry.queue_of,
            default_max_attempts=registry.max_attempts_of,
        )
        for spec in specs
    ]
    if otel is not None and otel.active():
        carrier = outcome.trace if outcome.trace is not None else otel.inject()
        if carrier is not None:
            return otel.with_trace(jobs, carrier)
    return jobs


def plan_followups(
    registry: Registry, rows: Sequence[JobRow], outcomes: Mapping[int, Outcome]
) -> FollowUpPlan:
    """Run the specs registered for each committed row's outcome, in registration order.

    A job whose args do not decode, or one of whose specs fails, contributes no
    follow-up at all and is listed in ``failed``.
    """
    plan = FollowUpPlan()
    for row in rows:
        try:
            plan.jobs.extend(plan_row(registry, row, outcomes[row.id]))
        except FollowUpError as exc:
            plan.failed[row.id] = exc
    return plan
