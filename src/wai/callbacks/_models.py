"""Callback ids, timeouts, CEL expressions and resolution decisions: the models, without I/O.

CEL support is optional: ``pip install 'wai[cel]'`` installs ``cel-python``. An
expression sees one variable, ``payload`` (the JSON the external system sent).
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from wai._job import JobRow, JobState
from wai._kinds import dumps
from wai._logging import emit, job_extra
from wai._outcomes import Outcome
from wai._storable import check_json, check_text
from wai.errors import CallbackNotFound, ValidationError

__all__ = [
    "DEFAULT_ACTIONS",
    "RETRY_ERROR",
    "CallbackExpressions",
    "CallbackResolution",
    "Decision",
    "ResolveRequest",
    "Resolved",
    "check_error",
    "check_timeout",
    "compile_expressions",
    "decide_resolution",
    "log_resolved",
    "parse_callback_id",
    "payload_json",
    "resolution_outcome",
]

logger = logging.getLogger("wai.callbacks")

#: Job outcomes are logged on ``wai.jobs``, whoever writes them (a worker, a resolution).
_jobs_logger = logging.getLogger("wai.jobs")

DefaultAction = Literal["complete", "fail", "ignore"]

#: What :meth:`resolve_callback` does when neither ``on_complete`` nor ``on_fail`` matches.
DEFAULT_ACTIONS: tuple[str, ...] = ("complete", "fail", "ignore")

#: The longest a callback may wait: ten years, in seconds.
MAX_TIMEOUT = 10 * 365 * 86400.0

_MAX_EXPRESSION = 4096

# CEL macros bind their first argument as a variable: `payload.items.all(i, i > 0)`.
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})


def parse_callback_id(value: object) -> UUID:
    """The callback id as a UUID.

    A string that is not a UUID names no callback (:class:`wai.CallbackNotFound`);
    anything but a string or a UUID is a :class:`wai.ValidationError`.
    """
    if isinstance(value, UUID):
        return value
    if not isinstance(value, str):
        raise ValidationError(f"a callback id is a UUID or its string, got {type(value).__name__}")
    # Longer than any spelling of a UUID: not echoed whole into the error (or a 404 body).
    if len(value) > 100:
        raise CallbackNotFound(f"no callback with id {value[:40]!r}… (not a UUID)")
    try:
        return UUID(value)
    except ValueError:
        raise CallbackNotFound(f"no callback with id {value!r} (not a UUID)") from None


def check_timeout(timeout: object, what: str = "timeout") -> float:
    """``timeout`` in seconds if it is a number in (0, ten years], else ValidationError."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or timeout != timeout  # NaN
        or not 0 < timeout <= MAX_TIMEOUT
    ):
        raise ValidationError(f"{what} must be a number of seconds > 0, got {timeout!r}")
    return float(timeout)


# -- CEL --------------------------------------------------------------------------------


def _celpy() -> Any:
    try:
        return importlib.import_module("celpy")
    except ImportError:
        raise ValidationError(
            "callback expressions (filter, on_complete, on_fail, transform) are CEL and need "
            "the cel-python package: pip install 'wai[cel]'"
        ) from None


@functools.cache
def _environment() -> Any:
    return _celpy().Environment()


def _any(_token: object) -> bool:
    return True


def _names(tree: Any) -> tuple[set[str], set[str]]:
    """(identifiers referenced, variables bound by macros) in a parsed CEL expression."""
    refs: set[str] = set()
    bound: set[str] = set()
    for node in tree.iter_subtrees():
        if node.data == "ident":
            refs.add(str(node.children[0]))
        elif node.data == "member_dot_arg" and len(node.children) == 3:
            method, args = node.children[1], node.children[2]
            if str(method) in _MACROS and args.children:
                bound.update(str(t) for t in args.children[0].scan_values(_any))
    return refs, bound


@functools.lru_cache(maxsize=512)
def _program(text: str) -> Any:
    env = _environment()
    tree = env.compile(text)
    return env.program(tree)


def _compile(name: str, text: object) -> str | None:
    if text is None:
        return None
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(f"callback {name} must be a CEL expression (a non-empty string)")
    if len(text) > _MAX_EXPRESSION:
        raise ValidationError(f"callback {name} is longer than {_MAX_EXPRESSION} characters")
    check_text(text, f"callback {name}")
    celpy = _celpy()
    env = _environment()
    try:
        tree = env.compile(text)
    except celpy.CELParseError as exc:
        raise ValidationError(f"callback {name} {text!r} is not valid CEL: {exc}") from None
    refs, bound = _names(tree)
    unknown = sorted(refs - bound - {"payload"})
    if unknown:
        raise ValidationError(
            f"callback {name} {text!r} references {', '.join(unknown)}: "
            "an expression may only use `payload`"
        )
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class CallbackExpressions:
    """The CEL expressions of one callback, evaluated by ``resolve_callback``.

    ``filter`` false ignores the payload; ``on_fail`` true fails the job;
    ``on_complete`` true completes it; ``transform`` shapes the payload a
    completion stores. Each is None when not set.
    """

    filter: str | None = None
    on_complete: str | None = None
    on_fail: str | None = None
    transform: str | None = None

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> CallbackExpressions:
        """The expressions stored on a jobs row."""
        return cls(
            filter=rec.get("callback_filter"),
            on_complete=rec.get("callback_on_complete"),
            on_fail=rec.get("callback_on_fail"),
            transform=rec.get("callback_transform"),
        )


def compile_expressions(
    *,
    filter: object = None,
    on_complete: object = None,
    on_fail: object = None,
    transform: object = None,
) -> CallbackExpressions:
    """Check the expressions at registration: valid CEL that only uses ``payload``.

    Raises :class:`wai.ValidationError` naming the bad expression, or saying to
    install ``wai[cel]`` when cel-python is missing.
    """
    return CallbackExpressions(
        filter=_compile("filter", filter),
        on_complete=_compile("on_complete", on_complete),
        on_fail=_compile("on_fail", on_fail),
        transform=_compile("transform", transform),
    )


def _evaluate(text: str, payload: Any) -> Any:
    celpy = _celpy()
    return _program(text).evaluate({"payload": celpy.json_to_cel(payload)})


def _truth(name: str, text: str, payload: Any, job: JobRow | None) -> bool | None:
    """True/False, or None when the expression errs or is not boolean (logged)."""
    extra = None if job is None else job_extra(job, expression=name)
    try:
        value = _evaluate(text, payload)
    except Exception as exc:
        emit(
            logger,
            logging.WARNING,
            "wai: callback %s %r failed on the payload%s: %s",
            name,
            text,
            _of(job),
            exc,
            extra=extra,
        )
        return None
    if isinstance(value, bool):  # celpy's BoolType subclasses int, not bool
        return value
    if type(value).__name__ == "BoolType":
        return bool(value)
    emit(
        logger,
        logging.WARNING,
        "wai: callback %s %r returned %r%s, not a boolean",
        name,
        text,
        value,
        _of(job),
        extra=extra,
    )
    return None


def _of(job: JobRow | None) -> str:
    return "" if job is None else f" (job {job.id})"


def _transformed(text: str, payload: Any) -> Any:
    celpy = _celpy()
    try:
        value = _evaluate(text, payload)
        shaped = json.loads(json.dumps(value, cls=celpy.CELJSONEncoder))
    except Exception as exc:
        raise ValidationError(
            f"callback transform {text!r} failed on the payload: {exc}; nothing was resolved"
        ) from None
    check_json(shaped, "callback transform result")  # a CEL literal can spell "\x00"
    return shaped


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What ``resolve_callback`` does: complete, fail or ignore, and with what."""

    action: Literal["complete", "fail", "ignore"]
    payload: Any = None
    error: str | None = None
    expression: str | None = None


def decide_resolution(
    expressions: CallbackExpressions,
    payload: Any,
    default_action: str,
    *,
    job: JobRow | None = None,
) -> Decision:
    """Evaluate a callback's expressions on ``payload``, in Awa's order.

    ``filter`` false → ignore (an error lets the payload through); ``on_fail``
    true → fail; ``on_complete`` true → complete; otherwise ``default_action``.
    A completion stores the payload shaped by ``transform`` (a transform error
    raises :class:`wai.ValidationError` and resolves nothing). An expression that
    errs or is not boolean counts as not matching and is logged (a WARNING of
    ``wai.callbacks``, naming ``job``, the row being resolved, when given).
    """
    if default_action not in DEFAULT_ACTIONS:
        raise ValidationError(
            f"default_action must be one of {', '.join(DEFAULT_ACTIONS)}, got {default_action!r}"
        )
    dumps(payload, "callback payload")
    e = expressions
    if e.filter is not None and _truth("filter", e.filter, payload, job) is False:
        return Decision(action="ignore")
    if e.on_fail is not None and _truth("on_fail", e.on_fail, payload, job):
        return Decision(
            action="fail",
            error=f"callback payload matched on_fail: {e.on_fail}",
            expression=e.on_fail,
        )
    action = default_action
    if e.on_complete is not None and _truth("on_complete", e.on_complete, payload, job):
        action = "complete"
    if action == "complete":
        shaped = _transformed(e.transform, payload) if e.transform is not None else payload
        return Decision(action="complete", payload=shaped)
    if action == "fail":
        return Decision(action="fail", error="callback resolved as failed (default_action)")
    return Decision(action="ignore")


@dataclass(frozen=True, slots=True, kw_only=True)
class CallbackResolution:
    """What ``resolve_callback`` did: ``action`` is completed, failed or ignored.

    ``job`` is the row after the resolution (unchanged when ignored); ``payload``
    the payload as stored (after ``transform``) for a completion.
    """

    action: Literal["completed", "failed", "ignored"]
    job: JobRow
    payload: Any = None


# -- resolution requests ----------------------------------------------------------------

Action = Literal["complete", "fail", "retry", "resume", "heartbeat", "resolve"]

#: The error entry ``retry_external`` appends.
RETRY_ERROR = "retry requested by external callback"

_APPLIES_TO = {
    "complete": "waiting_external or running",
    "fail": "waiting_external or running",
    "retry": "waiting_external",
    "resume": "running or waiting in place (wait_for_callback)",
    "heartbeat": "waiting_external or running",
    "resolve": "waiting_external or running",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolveRequest:
    """One resolution of a callback, checked and ready to apply.

    ``payload`` is JSON text (complete, resume) or the raw payload (resolve, whose
    expressions see it decoded); ``timeout`` is for heartbeat.
    """

    action: Action
    callback_id: UUID
    payload: Any = None
    error: str | None = None
    expression: str | None = None
    timeout: float | None = None
    default_action: str = "ignore"

    def not_found(self) -> CallbackNotFound:
        """The error for a callback id that matched no job."""
        return CallbackNotFound(
            f"no unresolved callback with id {self.callback_id}: it is unknown, was already "
            f"resolved, or its job moved on (timed out, cancelled, retried); "
            f"{self.action} applies to a {_APPLIES_TO[self.action]} job"
        )


def payload_json(payload: Any, *, keep_none: bool) -> str | None:
    """``payload`` as JSON text; None stays SQL NULL unless ``keep_none`` (JSON null)."""
    if payload is None and not keep_none:
        return None
    return dumps(payload, "callback payload")


def check_error(error: object) -> str:
    """The error text of ``fail_external``: a string that jsonb accepts."""
    if not isinstance(error, str):
        raise ValidationError(f"error must be a string, got {type(error).__name__}")
    check_text(error, "error")
    return error


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """A committed resolution: the row after it, and the outcome hooks and specs key on.

    ``outcome`` is None for resume, heartbeat and an ignored ``resolve_callback``
    (no event, no follow-up); ``action`` is what was done.
    """

    row: JobRow
    outcome: Outcome | None
    action: str
    payload: Any = None


def resolution_outcome(action: str, row: JobRow, error: str | None) -> Outcome | None:
    """The lifecycle outcome of a resolution (completed, exhausted, retried), or None."""
    if action == "complete":
        return Outcome(
            job_id=row.id, run_lease=row.run_lease, state=JobState.COMPLETED, event="completed"
        )
    if action == "fail":
        return Outcome(
            job_id=row.id,
            run_lease=row.run_lease,
            state=JobState.FAILED,
            event="exhausted",
            error=error,
            terminal=True,
        )
    if action == "retry" and row.state is JobState.FAILED:
        # retry_external on a job whose parked attempt was its last: exhausted instead.
        return Outcome(
            job_id=row.id,
            run_lease=row.run_lease,
            state=JobState.FAILED,
            event="exhausted",
            error=str(row.errors[-1]["error"]) if row.errors else RETRY_ERROR,
        )
    if action == "retry":
        return Outcome(
            job_id=row.id,
            run_lease=row.run_lease,
            state=JobState.AVAILABLE,
            event="retried",
            error=RETRY_ERROR,
        )
    return None


def log_resolved(resolved: Resolved, callback_id: UUID) -> None:
    """Log a committed resolution on ``wai.jobs``, at the level of a worker's outcome.

    A retry: INFO; the job failed for good (``fail_external``, a ``retry_external``
    with no attempt left, a resolution that matched ``on_fail``): WARNING; a
    completion, a resume, a heartbeat, an ignored payload: DEBUG. The ``extra`` is
    the job's (:func:`wai._logging.job_extra`) with ``callback_id``,
    ``callback_action`` and, when the job moved on, ``outcome``.
    """
    outcome = resolved.outcome
    event = None if outcome is None else outcome.event
    level = _RESOLVED_LEVELS.get(event or "", logging.DEBUG)
    if not _jobs_logger.isEnabledFor(level):
        return
    row = resolved.row
    match event:
        case "retried":
            what = "asked for a retry: it runs again"
        case "exhausted" if outcome is not None and outcome.terminal:
            what = f"failed it for good: {_first_line(outcome.error)}"
        case "exhausted":
            what = "asked for a retry, but no attempt is left: exhausted"
        case "completed":
            what = "completed it"
        case _:
            what = _QUIET.get(resolved.action, _IGNORED)
    extra = job_extra(row, callback_id=str(callback_id), callback_action=resolved.action)
    if event is not None:
        extra["outcome"] = event
    emit(
        _jobs_logger,
        level,
        "job %s (%s, queue %s) attempt %s/%s: callback %s %s",
        row.id,
        row.kind,
        row.queue,
        row.attempt,
        row.max_attempts,
        callback_id,
        what,
        extra=extra,
    )


_RESOLVED_LEVELS = {"retried": logging.INFO, "exhausted": logging.WARNING}

_IGNORED = "left it waiting: the payload was ignored (filter false, or default_action ignore)"

_QUIET = {
    "resume": "resumed the handler waiting in place",
    "heartbeat": "pushed its timeout back (heartbeat)",
}


def _first_line(text: str | None) -> str:
    stripped = (text or "").strip()
    return stripped.splitlines()[0] if stripped else ""
