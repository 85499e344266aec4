"""OpenTelemetry traces: spans of inserts, attempts, resolutions and rescues, and the
trace context jobs carry from one to the next (SDK in-memory exporter, real PostgreSQL).

Each test that records spans installs its own tracer provider and removes it afterwards
(:func:`spans`): every other test of the suite runs with OpenTelemetry installed but no
provider, the "no SDK configured" case.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

import wai
from tests.integration._helpers import FAST, fetch, serving, wait_for, wait_job
from wai import _otel
from wai._tracing import otel
from wai.transitions._rescue import rescue
from wai.worker import _queries as worker_db


def tracer() -> trace.Tracer:
    """The tests' tracer from the provider set now (a module-level one would keep the
    first test's provider)."""
    return trace.get_tracer("tests")


def _install(provider: TracerProvider | None) -> None:
    """Make ``provider`` the global tracer provider (None: unset), as OpenTelemetry's own
    test helpers do: the API lets a process set it only once."""
    trace._TRACER_PROVIDER_SET_ONCE = Once()  # pyright: ignore[reportPrivateUsage]
    trace._TRACER_PROVIDER = None  # pyright: ignore[reportPrivateUsage]
    if provider is not None:
        trace.set_tracer_provider(provider)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """An SDK tracer provider for this test, exporting to memory; unset afterwards."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _install(provider)
    try:
        yield exporter
    finally:
        _install(None)
        provider.shutdown()


def by_name(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = by_name(exporter, name)
    return span


def traceparent_of(span: ReadableSpan) -> str:
    ctx = span.get_span_context()
    assert ctx is not None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"


def stored(row: wai.JobRow) -> str:
    """The traceparent a job stores."""
    return row.metadata[_otel.TRACE_KEY]["traceparent"]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    ctx = span.get_span_context()
    assert ctx is not None
    return ctx.span_id


def linked_ids(span: ReadableSpan) -> list[int]:
    return [link.context.span_id for link in span.links]


#: The attributes :func:`render` shows, with a short name.
SHOWN = {
    "messaging.message.id": "id",
    "messaging.wai.kind": "kind",
    "messaging.wai.attempt": "attempt",
    "messaging.wai.outcome": "outcome",
    "messaging.wai.trigger.job_id": "trigger",
}


def render(finished: Sequence[ReadableSpan]) -> str:
    """The spans as an indented tree (by start time), with kinds, key attributes, links."""
    ids = {span_id(s): s for s in finished}
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in sorted(finished, key=lambda s: s.start_time or 0):
        parent = parent_id(s)
        children.setdefault(parent if parent in ids else None, []).append(s)
    lines: list[str] = []

    def walk(s: ReadableSpan, prefix: str, last: bool, top: bool) -> None:
        attrs = s.attributes or {}
        shown = " ".join(f"{short}={attrs[key]}" for key, short in SHOWN.items() if key in attrs)
        links = ", ".join(ids[i].name for i in linked_ids(s) if i in ids)
        line = f"{s.name} [{s.kind.name}]"
        if shown:
            line += f" {shown}"
        if s.status.status_code is StatusCode.ERROR:
            line += " ERROR"
        if links:
            line += f" (link: {links})"
        lines.append(line if top else f"{prefix}{'└── ' if last else '├── '}{line}")
        kids = children.get(span_id(s), [])
        inner = "" if top else prefix + ("    " if last else "│   ")
        for i, kid in enumerate(kids):
            walk(kid, inner, i == len(kids) - 1, False)

    for root in children.get(None, []):
        walk(root, "", True, True)
    return "\n".join(lines)


@dataclass
class Signup:
    user_id: int


@dataclass
class Welcome:
    user_id: int


async def welcome_done(client: wai.AsyncClient, job_id: int) -> wai.JobRow:
    """The Welcome follow-up of signup ``job_id`` once completed."""

    async def done() -> wai.JobRow | None:
        rows = await client.list_jobs(trigger_job_id=job_id)
        return rows[0] if rows and rows[0].state == "completed" else None

    return await wait_for(done, 10, what=f"the follow-up of job {job_id} to complete")


def serve_signups(client: wai.AsyncClient) -> None:
    """Signup (queue signup) completes and enqueues Welcome (queue mail), whose handler
    makes a span of its own."""

    @client.task(Signup, queue="signup")
    async def signup(job: wai.Job[Signup]) -> None:
        return None

    @client.task(Welcome, queue="mail")
    async def welcome(job: wai.Job[Welcome]) -> None:
        with tracer().start_as_current_span("send welcome email"):
            await asyncio.sleep(0)

    client.on_completed_enqueue(Signup, lambda args, job: Welcome(user_id=args.user_id))


# -- inserts ---------------------------------------------------------------------------


async def test_insert_is_a_producer_span_whose_context_the_job_stores(
    aclient: wai.AsyncClient, sclient: wai.Client, spans: InMemorySpanExporter
) -> None:
    with tracer().start_as_current_span("request") as request:
        job = await aclient.insert(Signup(user_id=1), queue="signup")
        other = await asyncio.to_thread(sclient.insert, Signup(user_id=2), queue="signup")
    a, b = by_name(spans, "insert signup")
    assert a.kind is SpanKind.PRODUCER
    assert parent_id(a) == parent_id(b) == request.get_span_context().span_id
    assert dict(a.attributes or {}) == {
        "messaging.system": "wai",
        "messaging.operation.type": "send",
        "messaging.operation.name": "insert",
        "messaging.destination.name": "signup",
        "messaging.wai.kind": "signup",
        "messaging.message.id": str(job.id),
    }
    assert (b.attributes or {})["messaging.message.id"] == str(other.id)
    # The row returned and the row stored both carry the insert span's context.
    assert stored(job) == traceparent_of(a)
    assert stored(await aclient.get_job(job.id)) == traceparent_of(a)
    assert stored(await aclient.get_job(other.id)) == traceparent_of(b)


async def test_group_commit_keeps_one_producer_span_per_call(
    database_url: str, spans: InMemorySpanExporter
) -> None:
    async with wai.AsyncClient(database_url, group_commit=True) as client:
        with tracer().start_as_current_span("request") as request:
            jobs = await asyncio.gather(
                *(client.insert(Signup(user_id=i), queue="signup") for i in range(5))
            )
        found = by_name(spans, "insert signup")
        assert len(found) == 5
        for span in found:
            assert span.kind is SpanKind.PRODUCER
            assert parent_id(span) == request.get_span_context().span_id
        by_id = {(s.attributes or {})["messaging.message.id"]: s for s in found}
        for job in jobs:
            assert stored(job) == traceparent_of(by_id[str(job.id)])
            assert stored(await client.get_job(job.id)) == stored(job)


async def test_the_asyncpg_bridge_is_the_same_producer_span(
    aclient: wai.AsyncClient, database_url: str, spans: InMemorySpanExporter
) -> None:
    import asyncpg

    import wai.bridges.asyncpg

    conn = await asyncpg.connect(database_url)
    try:
        with tracer().start_as_current_span("request") as request:
            async with conn.transaction():
                job = await wai.bridges.asyncpg.insert_job(conn, Signup(user_id=1), queue="signup")
    finally:
        await conn.close()
    span = one(spans, "insert signup")
    assert span.kind is SpanKind.PRODUCER
    assert parent_id(span) == request.get_span_context().span_id
    assert (span.attributes or {})["messaging.message.id"] == str(job.id)
    assert stored(job) == stored(await aclient.get_job(job.id)) == traceparent_of(span)


async def test_a_batch_is_one_span_and_every_job_stores_its_context(
    aclient: wai.AsyncClient, spans: InMemorySpanExporter
) -> None:
    rows = await aclient.insert_many(
        [
            Signup(user_id=1),
            wai.EnqueueRequest(Signup(user_id=2), metadata={"source": "web"}),
            wai.EnqueueRequest(Welcome(user_id=3), queue="mail"),
        ]
    )
    written = await aclient.copy_many([Signup(user_id=i) for i in range(4)])
    assert written == 4
    many = one(spans, "insert_many")  # two queues: no destination in the name
    attrs = dict(many.attributes or {})
    assert attrs["messaging.batch.message_count"] == 3
    assert "messaging.destination.name" not in attrs
    assert "messaging.message.id" not in attrs  # a batch names no single message
    assert {stored(r) for r in rows} == {traceparent_of(many)}
    assert rows[1].metadata["source"] == "web"  # the application's metadata stays
    copy = one(spans, "copy_many default")
    assert (copy.attributes or {})["messaging.batch.message_count"] == 4
    copied = await fetch(
        aclient, "SELECT DISTINCT metadata #>> '{wai.trace,traceparent}' FROM wai.jobs WHERE id > 3"
    )
    assert copied == [(traceparent_of(copy),)]


async def test_a_context_the_application_stores_itself_is_kept(
    aclient: wai.AsyncClient, spans: InMemorySpanExporter
) -> None:
    own = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    job = await aclient.insert(Signup(user_id=1), metadata={_otel.TRACE_KEY: own})
    assert (await aclient.get_job(job.id)).metadata[_otel.TRACE_KEY] == own


async def test_a_failed_insert_is_recorded_on_its_span(
    aclient: wai.AsyncClient, spans: InMemorySpanExporter
) -> None:
    unique = wai.UniqueOpts(by_args=True)
    await aclient.insert(Signup(user_id=1), unique=unique)
    with pytest.raises(wai.UniqueConflict):
        await aclient.insert(Signup(user_id=1), unique=unique)
    _, failed = by_name(spans, "insert default")
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "wai.errors.UniqueConflict"
    assert [e.name for e in failed.events] == ["exception"]


# -- attempts and follow-ups -------------------------------------------------------------

#: The trace of a signup whose completion enqueues a welcome email: the text
#: docs/observability.md shows.
CHAIN = """\
request [INTERNAL]
└── insert signup [PRODUCER] id=1 kind=signup
    └── process signup [CONSUMER] id=1 kind=signup attempt=1 outcome=completed (link: insert signup)
        └── process mail [CONSUMER] id=2 kind=welcome attempt=1 outcome=completed trigger=1 (link: process signup)
            └── send welcome email [INTERNAL]"""  # noqa: E501 - the rendered tree, as is


async def test_a_follow_up_chain_is_one_trace(
    aclient: wai.AsyncClient, spans: InMemorySpanExporter
) -> None:
    serve_signups(aclient)
    async with serving(aclient, {"signup": 2, "mail": 2}):
        with tracer().start_as_current_span("request"):
            job = await aclient.insert(Signup(user_id=7))
        welcome = await welcome_done(aclient, job.id)

    finished = spans.get_finished_spans()
    assert render(finished) == CHAIN
    insert, attempt = one(spans, "insert signup"), one(spans, "process signup")
    follow, email = one(spans, "process mail"), one(spans, "send welcome email")
    # parent and link: the creation context, as the messaging conventions allow for one message
    assert parent_id(attempt) == span_id(insert)
    assert linked_ids(attempt) == [span_id(insert)]
    assert parent_id(follow) == span_id(attempt)
    assert linked_ids(follow) == [span_id(attempt)]
    assert parent_id(email) == span_id(follow)  # the handler's own span nests in its attempt
    assert len({s.context.trace_id for s in finished if s.context is not None}) == 1
    assert dict(attempt.attributes or {}) == {
        "messaging.system": "wai",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "signup",
        "messaging.message.id": str(job.id),
        "messaging.wai.kind": "signup",
        "messaging.wai.attempt": 1,
        "messaging.wai.outcome": "completed",
    }
    assert (follow.attributes or {})["messaging.wai.trigger.outcome"] == "completed"
    assert stored(welcome) == traceparent_of(attempt)  # written after the attempt span ended
    assert attempt.status.status_code is StatusCode.UNSET


async def test_a_failed_attempt_records_its_error_and_the_retry_links_the_same_producer(
    aclient: wai.AsyncClient, spans: InMemorySpanExporter
) -> None:
    @aclient.task(Signup, queue="q")
    async def signup(job: wai.Job[Signup]) -> None:
        if job.attempt == 1:
            raise ValueError("mail server down")

    async with serving(aclient, {"q": 2}):
        job = await aclient.insert(Signup(user_id=1))
        await wait_job(aclient, job.id, "retryable")
        await fetch(aclient, "UPDATE wai.jobs SET run_at = now() WHERE id = %s", (job.id,))
        await wait_job(aclient, job.id, "completed")

    insert = one(spans, "insert q")
    first, second = sorted(by_name(spans, "process q"), key=lambda s: s.start_time or 0)
    for attempt in (first, second):
        assert parent_id(attempt) == span_id(insert)
        assert linked_ids(attempt) == [span_id(insert)]
    assert (first.attributes or {})["messaging.wai.attempt"] == 1
    assert (first.attributes or {})["messaging.wai.outcome"] == "retried"
    assert (first.attributes or {})["error.type"] == "ValueError"
    assert first.status.status_code is StatusCode.ERROR
    assert first.status.description == "ValueError: mail server down"
    (event,) = first.events
    assert event.name == "exception"
    assert (event.attributes or {})["exception.message"] == "mail server down"
    assert (second.attributes or {})["messaging.wai.attempt"] == 2
    assert (second.attributes or {})["messaging.wai.outcome"] == "completed"
    assert second.status.status_code is StatusCode.UNSET


async def test_failures_without_an_exception_are_errors_too(
    aclient: wai.AsyncClient, spans: InMemorySpanExporter
) -> None:
    @aclient.task(Signup, queue="q")
    async def signup(job: wai.Job[Signup]) -> Any:
        return 42  # not an outcome: the job fails for good

    @aclient.task(Welcome, queue="q")
    async def welcome(job: wai.Job[Welcome]) -> Any:
        return wai.RetryAfter(3600)  # asked for: not an error

    await aclient.insert(Signup(user_id=1))
    await aclient.insert(Welcome(user_id=1))
    await asyncio.wait_for(aclient.run({"q": 2}, burst=True, **FAST), 20)
    failed, retried = sorted(
        by_name(spans, "process q"), key=lambda s: str((s.attributes or {})["messaging.wai.kind"])
    )
    assert (failed.attributes or {})["messaging.wai.outcome"] == "exhausted"
    assert (failed.attributes or {})["error.type"] == "_OTHER"
    assert failed.status.status_code is StatusCode.ERROR
    assert (failed.status.description or "").startswith("handler returned int")
    assert (retried.attributes or {})["messaging.wai.outcome"] == "retried"
    assert retried.status.status_code is StatusCode.UNSET


async def test_the_handler_sees_the_baggage_of_the_insert(
    aclient: wai.AsyncClient, spans: InMemorySpanExporter
) -> None:
    seen: list[object] = []

    @aclient.task(Signup, queue="q")
    def signup(job: wai.Job[Signup]) -> None:  # a def handler: in a thread, same context
        seen.append(baggage.get_baggage("tenant"))
        seen.append(trace.get_current_span().get_span_context().span_id)

    token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        await aclient.insert(Signup(user_id=1))
    finally:
        otel_context.detach(token)
    await asyncio.wait_for(aclient.run({"q": 2}, burst=True, **FAST), 20)
    assert seen == ["acme", span_id(one(spans, "process q"))]


# -- callbacks and rescue -----------------------------------------------------------------


async def test_a_callback_resolution_is_a_span_its_follow_ups_continue(
    aclient: wai.AsyncClient, spans: InMemorySpanExporter
) -> None:
    @aclient.task(Signup, queue="q")
    async def signup(job: wai.Job[Signup]) -> Any:
        return wai.WaitForCallback(await job.register_callback(timeout=600))

    aclient.on_completed_enqueue(Signup, lambda args, job: Welcome(user_id=args.user_id))
    job = await aclient.insert(Signup(user_id=1))
    await asyncio.wait_for(aclient.run({"q": 2}, burst=True, **FAST), 20)
    parked = await aclient.get_job(job.id)
    assert parked.callback_id is not None
    with tracer().start_as_current_span("webhook") as webhook:
        await aclient.complete_external(parked.callback_id, {"ok": True})

    resolution = one(spans, "complete_external")
    assert resolution.kind is SpanKind.CLIENT
    assert parent_id(resolution) == webhook.get_span_context().span_id
    assert linked_ids(resolution) == [span_id(one(spans, "insert q"))]
    assert dict(resolution.attributes or {}) == {
        "messaging.system": "wai",
        "messaging.operation.name": "complete_external",
        "messaging.operation.type": "settle",
        "messaging.wai.callback.id": str(parked.callback_id),
        "messaging.message.id": str(job.id),
        "messaging.destination.name": "q",
        "messaging.wai.kind": "signup",
        "messaging.wai.callback.action": "complete",
        "messaging.wai.outcome": "completed",
    }
    attempt = one(spans, "process q")
    assert (attempt.attributes or {})["messaging.wai.outcome"] == "waiting_for_callback"
    (welcome,) = await aclient.list_jobs(trigger_job_id=job.id)
    assert stored(welcome) == traceparent_of(resolution)


async def test_a_rescue_is_one_span_linked_to_the_jobs_it_closed(
    aclient: wai.AsyncClient, spans: InMemorySpanExporter
) -> None:
    jobs = await aclient.insert_many([Signup(user_id=i) for i in range(3)])
    async with aclient._connection() as conn:
        await worker_db.job_claim(
            conn, aclient.schema, queue="default", limit=10, deadlines={}, default_deadline=None
        )
        await conn.execute("UPDATE wai.jobs SET heartbeat_at = now() - interval '1 hour'")
        rescued = await rescue(conn, aclient.schema, staleness=60, deadline_grace=1, limit=100)
        nothing = await rescue(conn, aclient.schema, staleness=60, deadline_grace=1, limit=100)
    assert len(rescued) == 3
    assert nothing == []
    span = one(spans, "rescue")  # and none for the pass that found nothing
    assert span.kind is SpanKind.INTERNAL
    attrs = dict(span.attributes or {})
    assert attrs["messaging.batch.message_count"] == 3
    assert attrs["messaging.wai.rescued.stale_heartbeat"] == 3
    assert sorted(attrs["messaging.wai.job_ids"]) == sorted(j.id for j in jobs)  # type: ignore[arg-type]
    assert linked_ids(span) == [span_id(one(spans, "insert_many default"))] * 3
    # the outbox rows owing their Rescued follow-ups carry the rescue's context
    details = await fetch(aclient, "SELECT detail #>> '{wai.trace,traceparent}' FROM wai.outbox")
    assert details == [(traceparent_of(span),)] * 3


# -- without an SDK, without the package ----------------------------------------------------


async def test_without_a_tracer_provider_nothing_is_stored(aclient: wai.AsyncClient) -> None:
    assert otel is not None
    assert not otel.active()
    serve_signups(aclient)
    async with serving(aclient, {"signup": 2, "mail": 2}):
        job = await aclient.insert(Signup(user_id=1))
        welcome = await welcome_done(aclient, job.id)
    assert job.metadata == {}
    assert welcome.metadata == {}


_WITHOUT_OPENTELEMETRY = """
import asyncio, sys
from dataclasses import dataclass


class NoOpenTelemetry:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NoOpenTelemetry())

import wai
from wai import _tracing

assert _tracing.otel is None


@dataclass
class Signup:
    user_id: int


@dataclass
class Welcome:
    user_id: int


client = wai.AsyncClient(sys.argv[1])


@client.task(Signup, queue="q")
async def signup(job):
    return None


@client.task(Welcome, queue="q")
async def welcome(job):
    return None


client.on_completed_enqueue(Signup, lambda args, job: Welcome(user_id=args.user_id))


async def main():
    async with client:
        job = await client.insert(Signup(user_id=1))
        await client.insert_many([Signup(user_id=2), Signup(user_id=3)])
        await client.run({"q": 2}, burst=True, poll_interval=0.1)
        jobs = await client.list_jobs()
        assert len(jobs) == 6, jobs
        assert all(j.state == "completed" and j.metadata == {} for j in jobs), jobs
    loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
    assert not loaded, loaded
    print("ran", len(jobs), "jobs")


asyncio.run(main())
"""


def test_wai_runs_without_opentelemetry(database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_WITHOUT_OPENTELEMETRY), database_url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ran 6 jobs"
