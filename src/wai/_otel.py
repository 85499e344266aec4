"""wai's OpenTelemetry spans, and the trace context its jobs carry (``opentelemetry-api``).

Imported through :mod:`wai._tracing` only, which leaves it out when the package is
missing. Callers test :func:`active` first: the functions here assume a tracer provider.

The spans follow the OpenTelemetry semantic conventions for messaging, with
``messaging.system`` ``"wai"`` (the system the application talks to; PostgreSQL is its
storage) and wai's own attributes under ``messaging.wai.*``:

- ``insert <queue>``, ``insert_many <queue>``, ``copy_many <queue>`` (PRODUCER, operation
  type ``send``): one per call, whatever the number of jobs. Its context is the creation
  context each job stores in its metadata under :data:`TRACE_KEY`.
- ``process <queue>`` (CONSUMER, ``process``): one per attempt, a child of the job's
  creation context and linked to it; the handler runs inside it.
- ``complete_external``, ``fail_external``, ``retry_external``, ``resume_external``,
  ``heartbeat_callback``, ``resolve_callback`` (CLIENT): one per callback resolution,
  in the caller's trace, linked to the job's creation context.
- ``rescue`` (INTERNAL): one per rescue transaction that closed attempts, linked to
  (at most :data:`MAX_LINKS` of) their jobs' creation contexts.

A follow-up stores the context of the span that produced its trigger's outcome: the
attempt, the resolution, the rescue (or the caller's span, for an operator's cancel).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    Link,
    ProxyTracerProvider,
    Span,
    SpanKind,
    Status,
    StatusCode,
    Tracer,
    TracerProvider,
)
from opentelemetry.util.types import AttributeValue

from wai._codec import dumps
from wai._inserts import NewJob, with_metadata
from wai._job import JobRow, JobState
from wai._json import loads
from wai._logging import emit, job_extra
from wai._outcomes import Outcome
from wai._version import __version__

__all__ = [
    "MAX_IDS",
    "MAX_LINKS",
    "SYSTEM",
    "TRACE_KEY",
    "Attempt",
    "Rescuing",
    "Resolving",
    "Sending",
    "active",
    "inject",
    "processing",
    "rescuing",
    "resolving",
    "sending",
    "stored_trace",
    "with_trace",
]

logger = logging.getLogger("wai.tracing")

#: ``messaging.system`` of every span.
SYSTEM = "wai"

#: The key of a job's metadata (and of an outbox row's detail) that holds its creation
#: context, as the configured propagators wrote it: ``{"traceparent": ..., ...}``.
TRACE_KEY = "wai.trace"

#: The most links one span gets (a rescue's, to the jobs it closed).
MAX_LINKS = 32

#: The most job ids one span names (``messaging.wai.job_ids`` of a rescue).
MAX_IDS = 100

#: The operation name of each callback resolution (the client method that makes it).
_RESOLUTIONS = {
    "complete": "complete_external",
    "fail": "fail_external",
    "retry": "retry_external",
    "resume": "resume_external",
    "heartbeat": "heartbeat_callback",
    "resolve": "resolve_callback",
}

#: The resolutions that settle the job (operation type ``settle``); a resume hands a
#: payload to a running handler and a heartbeat pushes a timeout out: neither settles.
_SETTLING = frozenset({"complete", "fail", "retry", "resolve"})

_tracer_of: tuple[TracerProvider, Tracer] | None = None


def active() -> bool:
    """Whether a tracer provider is set (the SDK is configured): wai's spans are recorded.

    Until one is set, wai starts no span and stores no trace context.
    """
    return not isinstance(trace.get_tracer_provider(), ProxyTracerProvider)


def _tracer() -> Tracer:
    """wai's tracer from the provider set now (another one after a reset, in tests)."""
    global _tracer_of  # one cached tracer per process, kept in step with the provider
    provider = trace.get_tracer_provider()
    cached = _tracer_of
    if cached is None or cached[0] is not provider:
        cached = _tracer_of = (provider, provider.get_tracer("wai", __version__))
    return cached[1]


# -- the context jobs carry --------------------------------------------------------------

_warned: set[str] = set()


def _warn_once(what: str, exc: Exception, job: JobRow | None = None) -> None:
    """A tracing failure is logged once per process and never stops the job path.

    The record names ``job`` (its ``extra`` fields) when the failure happened on it.
    """
    if what not in _warned:
        _warned.add(what)
        emit(
            logger,
            logging.WARNING,
            "wai: trace context %s failed (%s)%s; going on without it",
            what,
            exc,
            "" if job is None else f" on job {job.id}",
            extra=None if job is None else job_extra(job),
        )


def inject(context: Context | None = None, *, job: JobRow | None = None) -> dict[str, str] | None:
    """``context`` (default: the current one) as the configured propagators write it.

    None when they write nothing (no valid span, no baggage), or what they write could
    not be stored as JSON in PostgreSQL. ``job``: the job whose attempt this is, named
    in the warning.
    """
    carrier: dict[str, str] = {}
    try:
        propagate.inject(carrier, context=context)
        if carrier:
            dumps(carrier, "trace context")
    except Exception as exc:  # a propagator's failure, or text PostgreSQL cannot store
        _warn_once("injection", exc, job)
        return None
    return carrier or None


#: Contexts extracted lately, by the carrier they came from: the jobs of one insert_many
#: or copy_many store the same carrier, and a Context is immutable, so they share one
#: (as long as the same propagators read it).
_extracted: dict[tuple[int, tuple[tuple[str, str], ...]], Context] = {}
_EXTRACTED_MAX = 256


def _extract(stored: Mapping[str, str] | None, job: JobRow | None = None) -> Context:
    """The context ``stored`` describes; an empty one (a root) when there is none."""
    if not stored:
        return Context()
    key = (id(propagate.get_global_textmap()), tuple(sorted(stored.items())))
    found = _extracted.get(key)
    if found is not None:
        return found
    try:
        context = propagate.extract(stored, context=Context())
    except Exception as exc:
        _warn_once("extraction", exc, job)
        return Context()
    if len(_extracted) >= _EXTRACTED_MAX:
        _extracted.clear()
    _extracted[key] = context
    return context


def stored_trace(values: Mapping[str, Any]) -> dict[str, str] | None:
    """The creation context stored in a job's metadata (or an outbox detail), if any.

    Only string keys and values are kept: metadata is the application's too, and may hold
    anything under :data:`TRACE_KEY`.
    """
    value = values.get(TRACE_KEY)
    if not isinstance(value, dict) or not value:
        return None
    items = cast("dict[object, object]", value).items()
    carrier = {k: v for k, v in items if isinstance(k, str) and isinstance(v, str)}
    return carrier or None


def with_trace(jobs: Sequence[NewJob], carrier: Mapping[str, str]) -> list[NewJob]:
    """``jobs`` storing ``carrier`` in their metadata; one that brings its own keeps it.

    (The conventions say a creation context the application provides is not replaced.)
    """
    stored = dict(carrier)
    fragment = dumps({TRACE_KEY: stored}, "trace context")
    out: list[NewJob] = []
    for job in jobs:
        if job.metadata == "{}":
            out.append(with_metadata(job, fragment))
            continue
        metadata: dict[str, Any] = loads(job.metadata)
        if TRACE_KEY in metadata:
            out.append(job)
            continue
        metadata[TRACE_KEY] = stored
        out.append(with_metadata(job, dumps(metadata, "metadata")))
    return out


def _link(stored: Mapping[str, str] | None) -> Link | None:
    """A link to the span ``stored`` names, when it names a valid one."""
    if not stored:
        return None
    span_context = trace.get_current_span(_extract(stored)).get_span_context()
    return Link(span_context) if span_context.is_valid else None


# -- errors ------------------------------------------------------------------------------


def _error_type(exc: BaseException) -> str:
    cls = type(exc)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


def _describe(exc: BaseException) -> str:
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # its __str__ raises: the type still says something
        return type(exc).__name__


def _failed(span: Span, exc: BaseException) -> None:
    """Record ``exc`` on ``span``: an exception event, ``error.type``, status ERROR."""
    span.record_exception(exc)
    span.set_attribute("error.type", _error_type(exc))
    span.set_status(Status(StatusCode.ERROR, _describe(exc)))


# -- inserts -----------------------------------------------------------------------------


class Sending:
    """The span of one insert call, and the context the jobs it inserts store."""

    __slots__ = ("_span", "trace")

    def __init__(self, span: Span, carrier: dict[str, str] | None) -> None:
        self._span = span
        #: The span's context as the propagators write it (None: nothing to store).
        self.trace = carrier

    def sent(self, rows: Sequence[JobRow]) -> None:
        """Name the job inserted, when the call inserted one (``messaging.message.id``)."""
        if len(rows) == 1:
            self._span.set_attribute("messaging.message.id", str(rows[0].id))


@contextmanager
def sending(operation: str, jobs: Sequence[NewJob]) -> Iterator[Sending]:
    """The PRODUCER span of an insert call (``operation``: insert, insert_many, copy_many).

    Named ``<operation> <queue>`` when every job goes to one queue, else ``<operation>``.
    An exception leaving the block is recorded (status ERROR) and raised on.
    """
    queue: str | None = jobs[0].queue
    kind: str | None = jobs[0].kind
    for job in jobs:
        if job.queue != queue:
            queue = None
        if job.kind != kind:
            kind = None
    attributes: dict[str, AttributeValue] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": operation,
    }
    if queue is not None:
        attributes["messaging.destination.name"] = queue
    if kind is not None:
        attributes["messaging.wai.kind"] = kind
    if len(jobs) != 1:
        attributes["messaging.batch.message_count"] = len(jobs)
    name = operation if queue is None else f"{operation} {queue}"
    with _tracer().start_as_current_span(
        name,
        kind=SpanKind.PRODUCER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield Sending(span, inject())
        except BaseException as exc:
            _failed(span, exc)
            raise


# -- attempts ----------------------------------------------------------------------------


class Attempt:
    """The span of one attempt: what the attempt's outcome sets on it."""

    __slots__ = ("_errored", "_span", "trace")

    def __init__(self, span: Span, carrier: dict[str, str] | None) -> None:
        self._span = span
        self._errored = False
        #: The span's context as the propagators write it: the follow-ups' creation context.
        self.trace = carrier

    def failed(self, exc: BaseException) -> None:
        """Record the exception that failed the attempt (the handler's, or its deadline's)."""
        self._errored = True
        _failed(self._span, exc)

    def finished(self, outcome: Outcome) -> None:
        """Set the outcome (``messaging.wai.outcome``); a failed job without an exception
        recorded (an unknown kind, a bad return value) gets status ERROR with its error."""
        span = self._span
        span.set_attribute("messaging.wai.outcome", outcome.event)
        if outcome.state is JobState.FAILED and not self._errored:
            span.set_attribute("error.type", "_OTHER")
            error = (outcome.error or "").split("\n", 1)[0]
            span.set_status(Status(StatusCode.ERROR, error))

    def stopped(self) -> None:
        """The worker stopped the attempt (shutdown, interrupt): not the job's failure."""
        self._span.set_attribute("messaging.wai.outcome", "stopped")


@contextmanager
def processing(row: JobRow, *, carry: bool = True) -> Iterator[Attempt]:
    """The CONSUMER span of an attempt of ``row``, current in the block.

    With ``carry`` the span's context is written out (:attr:`Attempt.trace`) for the
    follow-ups and outbox rows of its outcome; without (a kind with no follow-up spec,
    whose outcomes enqueue nothing) that work is skipped.

    Its parent is the creation context the job stores (the conventions allow it for a
    single message; a job that stores none starts a trace), and it links to it as the
    conventions ask of every ``process`` span. The context the worker's own task holds,
    if any, is linked too, never a parent. Baggage the creation context carried is
    current in the block, so the handler sees it.
    """
    stored = stored_trace(row.metadata) if row.metadata else None
    parent = _extract(stored, row)
    links: list[Link] = []
    creation = trace.get_current_span(parent).get_span_context()
    if creation.is_valid:
        links.append(Link(creation))
    ambient = trace.get_current_span().get_span_context()
    if ambient.is_valid:
        links.append(Link(ambient))
    attributes: dict[str, AttributeValue] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": row.queue,
        "messaging.message.id": str(row.id),
        "messaging.wai.kind": row.kind,
        "messaging.wai.attempt": row.attempt,
    }
    trigger = row.trigger
    if trigger is not None:
        attributes["messaging.wai.trigger.job_id"] = trigger.job_id
        attributes["messaging.wai.trigger.outcome"] = trigger.outcome
    span = _tracer().start_span(
        f"process {row.queue}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        links=links,
    )
    current = trace.set_span_in_context(span, parent)
    token = otel_context.attach(current)
    attempt = Attempt(span, inject(current, job=row) if carry else None)
    try:
        yield attempt
    except asyncio.CancelledError:
        attempt.stopped()
        raise
    except BaseException as exc:  # the executor returns outcomes; a bug still shows here
        _failed(span, exc)
        raise
    finally:
        otel_context.detach(token)
        span.end()


# -- callback resolutions ----------------------------------------------------------------


class Resolving:
    """The span of one callback resolution."""

    __slots__ = ("_span",)

    def __init__(self, span: Span) -> None:
        self._span = span

    def resolved(self, row: JobRow, action: str, event: str | None) -> None:
        """Name the job the resolution applied to, what it did, and link its creation context."""
        span = self._span
        span.set_attributes(
            {
                "messaging.message.id": str(row.id),
                "messaging.destination.name": row.queue,
                "messaging.wai.kind": row.kind,
                "messaging.wai.callback.action": action,
            }
        )
        if event is not None:
            span.set_attribute("messaging.wai.outcome", event)
        link = _link(stored_trace(row.metadata))
        if link is not None:
            span.add_link(link.context)


@contextmanager
def resolving(action: str, callback_id: object) -> Iterator[Resolving]:
    """The CLIENT span of a callback resolution (``action``: complete, fail, retry ...).

    A child of the caller's current span; the follow-ups the resolution enqueues store
    its context. An exception leaving the block is recorded and raised on.
    """
    operation = _RESOLUTIONS[action]
    attributes: dict[str, AttributeValue] = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": operation,
        "messaging.wai.callback.id": str(callback_id),
    }
    if action in _SETTLING:
        attributes["messaging.operation.type"] = "settle"
    with _tracer().start_as_current_span(
        operation,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield Resolving(span)
        except BaseException as exc:
            _failed(span, exc)
            raise


# -- rescue ------------------------------------------------------------------------------


class Rescuing:
    """The span of one rescue transaction."""

    __slots__ = ("_span",)

    def __init__(self, span: Span) -> None:
        self._span = span

    def rescued(self, rows: Sequence[tuple[JobRow, str]]) -> None:
        """Name the jobs rescued (at most :data:`MAX_IDS`), count them by reason, and link
        (at most :data:`MAX_LINKS` of) their creation contexts."""
        span = self._span
        reasons: dict[str, int] = {}
        for _row, reason in rows:
            reasons[reason] = reasons.get(reason, 0) + 1
        span.set_attribute("messaging.batch.message_count", len(rows))
        span.set_attribute("messaging.wai.job_ids", [row.id for row, _ in rows[:MAX_IDS]])
        for reason, n in sorted(reasons.items()):
            span.set_attribute(f"messaging.wai.rescued.{reason}", n)
        linked = 0
        for row, _ in rows:
            if linked == MAX_LINKS:
                break
            link = _link(stored_trace(row.metadata))
            if link is not None:
                span.add_link(link.context)
                linked += 1


@contextmanager
def rescuing() -> Iterator[Rescuing]:
    """The INTERNAL span of a rescue transaction (begun once it found attempts to close).

    The follow-ups of the rescued jobs (left to the outbox) store its context. An
    exception leaving the block is recorded and raised on.
    """
    attributes: dict[str, AttributeValue] = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": "rescue",
    }
    with _tracer().start_as_current_span(
        "rescue",
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield Rescuing(span)
        except BaseException as exc:
            _failed(span, exc)
            raise
