"""The trace context a job stores in its metadata: reading it back, writing it in (no database)."""

from __future__ import annotations

from dataclasses import dataclass

from wai import _otel
from wai._inserts import EnqueueRequest, build_args_job, build_job
from wai._job import JobState
from wai._json import loads
from wai._outcomes import Outcome
from wai._tracing import otel

KEY = _otel.TRACE_KEY
CONTEXT = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}


@dataclass
class Ping:
    n: int


def _queue(_kind: str) -> str | None:
    return None


def test_the_optional_module_is_found_when_installed() -> None:
    assert otel is _otel


def test_stored_trace_keeps_string_entries_only() -> None:
    assert _otel.stored_trace({}) is None
    assert _otel.stored_trace({KEY: "00-abc"}) is None
    assert _otel.stored_trace({KEY: {}}) is None
    assert _otel.stored_trace({KEY: {"traceparent": 5, 7: "x"}}) is None
    assert _otel.stored_trace({KEY: {**CONTEXT, "tracestate": None}}) == CONTEXT


def test_with_trace_writes_the_context_into_each_jobs_metadata() -> None:
    bare = build_args_job(Ping(1), default_queue=_queue)
    own = build_job(EnqueueRequest(Ping(2), metadata={"source": "web"}), default_queue=_queue)
    other = {"traceparent": "00-11111111111111111111111111111111-2222222222222222-01"}
    kept = build_job(EnqueueRequest(Ping(3), metadata={KEY: other}), default_queue=_queue)
    a, b, c = _otel.with_trace([bare, own, kept], CONTEXT)
    assert loads(a.metadata) == {KEY: CONTEXT}
    assert loads(b.metadata) == {"source": "web", KEY: CONTEXT}
    assert c is kept  # a context the application stored is not replaced
    assert (a.kind, a.args, a.queue, a.trigger) == (bare.kind, bare.args, bare.queue, bare.trigger)


def test_nothing_is_injected_without_a_span() -> None:
    assert _otel.inject() is None


def test_an_outcomes_trace_takes_no_part_in_comparisons() -> None:
    plain = Outcome(job_id=1, run_lease=1, state=JobState.COMPLETED, event="completed")
    traced = Outcome(
        job_id=1, run_lease=1, state=JobState.COMPLETED, event="completed", trace=CONTEXT
    )
    assert plain == traced
    assert hash(plain) == hash(traced)
