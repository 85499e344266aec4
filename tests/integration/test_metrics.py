"""wai's metrics after a known workload: exact counts in memory, in the Prometheus text
format (parsed back with prometheus_client's parser) and through an OpenTelemetry SDK
meter provider with an in-memory reader; gauges from the database and the runtime.

Counters are process-wide and cumulative, so every test compares what its workload
added (queue names of its own) against a snapshot taken before it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from prometheus_client.parser import text_string_to_metric_families

import wai
from tests.integration._helpers import fetch, serving, wait_for, wait_job
from tests.integration.test_admin import keyed
from wai import _prometheus
from wai._gauges import DatabaseGauges
from wai._metrics import METRICS, SPECS, Labels, prometheus_name
from wai.worker import _queries as worker_db


@dataclass
class Order:
    n: int = 0


@dataclass
class Receipt:
    n: int = 0


@dataclass
class Flaky:
    n: int = 0


@dataclass
class Doomed:
    n: int = 0


def counts(name: str) -> dict[Labels, float]:
    return METRICS.counters[name].snapshot()


def delta(before: dict[Labels, float], name: str) -> dict[Labels, float]:
    """What metric ``name`` gained since ``before`` (label sets that did not move left out)."""
    after = counts(name)
    return {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}


def hist_counts(name: str) -> dict[Labels, int]:
    return {k: v.count for k, v in METRICS.histograms[name].snapshot().items()}


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    """An SDK meter provider reading wai's instruments into memory (bound for this test)."""
    memory = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[memory])
    wai.metrics.bind_meter_provider(provider)
    try:
        yield memory
    finally:
        provider.shutdown()


def otel_points(memory: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = memory.get_metrics_data()
    assert data is not None
    out: dict[str, list[Any]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            if scope.scope.name != "wai":
                continue
            for metric in scope.metrics:
                out.setdefault(metric.name, []).extend(metric.data.data_points)
    return out


def prometheus_samples() -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every sample of the rendered endpoint text, by sample name and sorted labels."""
    text = _prometheus.render(_prometheus.registry()).decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


async def test_a_known_workload_is_counted_exactly_everywhere(
    aclient: wai.AsyncClient, reader: InMemoryMetricReader
) -> None:
    @aclient.task(Order, queue="m-orders")
    async def order(job: wai.Job[Order]) -> None:
        return None

    @aclient.task(Receipt, queue="m-mail")
    async def receipt(job: wai.Job[Receipt]) -> None:
        return None

    @aclient.task(Flaky, queue="m-orders", max_attempts=3)
    async def flaky(job: wai.Job[Flaky]) -> wai.RetryAfter | None:
        return wai.RetryAfter(0.05) if job.attempt == 1 else None

    @aclient.task(Doomed, queue="m-orders", max_attempts=1)
    async def doomed(job: wai.Job[Doomed]) -> None:
        raise ValueError("no")

    aclient.on_completed_enqueue(Order, lambda args, job: Receipt(n=args.n))
    names = [s.name for s in SPECS if s.kind == "counter"]
    before = {name: counts(name) for name in names}
    durations = hist_counts("wai.job.duration")
    pickups = hist_counts("wai.job.pickup_latency")

    await aclient.insert_many([Order(n=i) for i in range(5)])
    await aclient.insert_many([Flaky(n=i) for i in range(3)])
    await aclient.insert_many([Doomed(n=i) for i in range(2)])

    async with serving(aclient, {"m-orders": 4, "m-mail": 4}):

        async def settled() -> bool:
            rows = await fetch(
                aclient,
                "SELECT count(*) FROM wai.jobs WHERE queue LIKE 'm-%%' "
                "AND state IN ('completed', 'failed')",
            )
            return rows[0][0] == 15 or None  # type: ignore[return-value]

        await wait_for(settled, 15, what="the workload to finish")
        # the outcomes of the last batch are counted once committed: wait for the report
        await wait_for(
            lambda: (
                delta(before["wai.jobs.completed"], "wai.jobs.completed").get(("m-mail", "receipt"))
                == 5
                or None
            ),
            5,
        )

    o, m = ("m-orders",), ("m-mail",)
    expected = {
        "wai.jobs.inserted": {(*o, "order"): 5, (*o, "flaky"): 3, (*o, "doomed"): 2},
        "wai.jobs.claimed": {
            (*o, "order"): 5,
            (*o, "flaky"): 6,
            (*o, "doomed"): 2,
            (*m, "receipt"): 5,
        },
        "wai.jobs.completed": {(*o, "order"): 5, (*o, "flaky"): 3, (*m, "receipt"): 5},
        "wai.jobs.retried": {(*o, "flaky"): 3},
        "wai.jobs.failed": {(*o, "doomed"): 2},
        "wai.followups.inserted": {(*m, "receipt", "completed"): 5},
    }
    for name in names:
        assert delta(before[name], name) == expected.get(name, {}), name

    # histograms: one duration per committed attempt, by outcome; one pickup per claim
    got = hist_counts("wai.job.duration")
    assert {k: got[k] - durations.get(k, 0) for k in got if got[k] != durations.get(k, 0)} == {
        (*o, "order", "completed"): 5,
        (*o, "flaky", "retried"): 3,
        (*o, "flaky", "completed"): 3,
        (*o, "doomed", "failed"): 2,
        (*m, "receipt", "completed"): 5,
    }
    got = hist_counts("wai.job.pickup_latency")
    assert {k: got[k] - pickups.get(k, 0) for k in got if got[k] != pickups.get(k, 0)} == (
        expected["wai.jobs.claimed"]
    )

    # Prometheus: the same values, under the Prometheus names
    prom = prometheus_samples()
    for name in names:
        spec = next(s for s in SPECS if s.name == name)
        samples = prom.get(prometheus_name(spec), {})
        for labels, value in counts(name).items():
            key = tuple(sorted(zip(spec.labels, labels, strict=True)))
            assert samples[key] == value, (name, labels)
    flaky_retried = (("kind", "flaky"), ("outcome", "retried"), ("queue", "m-orders"))
    assert prom["wai_job_duration_seconds_count"][flaky_retried] >= 3
    inf = tuple(sorted((*flaky_retried, ("le", "+Inf"))))
    count = prom["wai_job_duration_seconds_count"][flaky_retried]
    assert prom["wai_job_duration_seconds_bucket"][inf] == count

    # OpenTelemetry: the same counter values; histograms counted since the reader was bound
    points = otel_points(reader)
    for name in names:
        spec = next(s for s in SPECS if s.name == name)
        seen = {
            tuple(str((p.attributes or {})[k]) for k in spec.labels): p.value
            for p in points.get(name, [])
            if isinstance(p, NumberDataPoint)
        }
        assert seen == counts(name), name
    duration = {
        tuple(str((p.attributes or {})[k]) for k in ("queue", "kind", "outcome")): p.count
        for p in points["wai.job.duration"]
        if isinstance(p, HistogramDataPoint)
    }
    assert duration[(*o, "flaky", "retried")] == 3
    assert duration[(*m, "receipt", "completed")] == 5


async def test_rescues_and_dead_letters_are_counted_by_reason(
    aclient: wai.AsyncClient,
) -> None:
    @aclient.task(Doomed, queue="m-dlq", max_attempts=1)
    async def doomed(job: wai.Job[Doomed]) -> None:
        raise wai.TerminalError("never")

    @aclient.task(Order, queue="m-stuck")  # a queue no worker of this test serves
    async def order(job: wai.Job[Order]) -> None:
        return None

    rescued = counts("wai.jobs.rescued")
    dead = counts("wai.jobs.dead_lettered")
    await aclient.insert_many([Order(n=i) for i in range(3)])
    async with aclient._connection() as conn:  # pyright: ignore[reportPrivateUsage]
        claimed = await worker_db.job_claim(
            conn, aclient.schema, queue="m-stuck", limit=10, deadlines={}, default_deadline=None
        )
        assert len(claimed) == 3
        await conn.execute("UPDATE wai.jobs SET heartbeat_at = now() - interval '1 hour'")
    await aclient.insert_many([Doomed(n=i) for i in range(2)])
    async with serving(
        aclient, {"m-dlq": wai.QueueConfig(concurrency=2, dlq=True)}, rescue_interval=0.1
    ):
        await wait_for(
            lambda: delta(rescued, "wai.jobs.rescued") or None, 10, what="the rescue to count"
        )
        await wait_for(
            lambda: (
                delta(dead, "wai.jobs.dead_lettered") == {("m-dlq", "doomed", "terminal_error"): 2}
                or None
            ),
            10,
            what="the dead letters to count",
        )
    assert delta(rescued, "wai.jobs.rescued") == {("m-stuck", "order", "stale_heartbeat"): 3}


async def test_gauges_come_from_the_database_and_the_runtime(aclient: wai.AsyncClient) -> None:
    @aclient.task(Order, queue="m-gauge")
    async def order(job: wai.Job[Order]) -> None:
        return None

    @aclient.task(Receipt, queue="m-idle")  # a queue no worker of this test serves
    async def receipt(job: wai.Job[Receipt]) -> None:
        return None

    await aclient.insert_many([Receipt(n=i) for i in range(4)])
    gauges = DatabaseGauges(aclient, interval=60)
    async with serving(aclient, {"m-gauge": 3}, depth_interval=0.1):
        # the leader's depth sample holds m-idle's 4 available jobs
        async def sampled() -> bool | None:
            await gauges.refresh()
            return (
                any(
                    s.name == "wai.queue.depth"
                    and s.labels == ("m-idle", "available")
                    and s.value == 4
                    for s in gauges.samples()
                )
                or None
            )

        await wait_for(sampled, 10, what="a depth sample of m-idle")
        samples = {(s.name, s.labels): s.value for s in METRICS.gauge_samples()}
        runtime = aclient._runtime  # pyright: ignore[reportPrivateUsage]
        assert runtime is not None
        assert samples[("wai.worker.in_flight", ("m-gauge",))] == 0
        assert ("wai.leader", (runtime.instance_id,)) in samples
        assert samples[("wai.pool.size", ())] >= 1
        assert 0 <= samples[("wai.heartbeat.lag", ())] < 30
        await wait_for(
            lambda: (runtime.elector is not None and runtime.elector.is_leader) or None, 5
        )
        samples = {(s.name, s.labels): s.value for s in METRICS.gauge_samples()}
        assert samples[("wai.leader", (runtime.instance_id,))] == 1
    ours = {(s.name, s.labels): s.value for s in gauges.samples()}
    assert ours[("wai.queue.depth", ("m-idle", "available"))] == 4
    assert ours[("wai.queue.oldest_available_age", ("m-idle",))] >= 0
    assert ours[("wai.outbox.pending", ())] == 0
    assert ours[("wai.outbox.failed", ())] == 0
    assert not math.isnan(ours[("wai.metrics.sampled_at", ())])
    # a stopped runtime reports none of its gauges
    left = {(s.name, s.labels) for s in METRICS.gauge_samples()}
    assert ("wai.worker.in_flight", ("m-gauge",)) not in left
    assert ("wai.leader", (runtime.instance_id,)) not in left


async def test_an_attempt_refunded_at_shutdown_counts_as_no_outcome(
    aclient: wai.AsyncClient,
) -> None:
    started = asyncio.Event()

    @aclient.task(Order, queue="m-stop")
    async def order(job: wai.Job[Order]) -> None:
        started.set()
        await asyncio.Event().wait()  # runs until the worker stops it

    @aclient.task(Receipt, queue="m-stop")
    async def receipt(job: wai.Job[Receipt]) -> wai.Snooze:
        return wai.Snooze(3600)  # a real snooze, which gives its attempt back too

    names = [s.name for s in SPECS if s.kind == "counter"]
    before = {name: counts(name) for name in names}
    snoozing = await aclient.insert(Receipt(n=1))
    row = await aclient.insert(Order(n=1))
    async with serving(aclient, {"m-stop": 2}, shutdown_timeout=0.2):
        await asyncio.wait_for(started.wait(), 10)
        await wait_job(aclient, snoozing.id, "scheduled")
    after = await aclient.get_job(row.id)
    assert (after.state, after.attempt) == ("available", 0)  # put back, attempt refunded
    moved = {name: delta(before[name], name) for name in names}
    assert {name: d for name, d in moved.items() if d} == {
        "wai.jobs.claimed": {("m-stop", "order"): 1, ("m-stop", "receipt"): 1},
        "wai.jobs.inserted": {("m-stop", "order"): 1, ("m-stop", "receipt"): 1},
        "wai.jobs.snoozed": {("m-stop", "receipt"): 1},  # the handler's, not the stop's
    }


async def test_flow_control_gauges_per_queue(aclient: wai.AsyncClient) -> None:
    await aclient.set_queue_limits(
        "m-limited", rate_limit=wai.RateLimit(50, per=1.0, burst=10), global_concurrency=5
    )
    await aclient.set_queue_limits("m-rated", rate_limit=wai.RateLimit(3, per=60.0))
    await keyed(aclient, queue="m-keyed")
    gauges = DatabaseGauges(aclient, interval=60)
    await gauges.refresh()
    ours = {(s.name, s.labels): s.value for s in gauges.samples() if s.name.startswith("wai.queue")}
    assert 9.9 <= ours.pop(("wai.queue.rate_tokens", ("m-limited",))) <= 10  # starts full
    assert ours.pop(("wai.queue.rate_tokens", ("m-rated",))) == pytest.approx(1, abs=0.01)
    assert ours == {
        ("wai.queue.global_concurrency", ("m-limited",)): 5,
        ("wai.queue.keys_running", ("m-limited",)): 0,
        ("wai.queue.waiting_turn", ("m-limited",)): 0,
        ("wai.queue.keys_running", ("m-rated",)): 0,
        ("wai.queue.waiting_turn", ("m-rated",)): 0,
        ("wai.queue.keys_running", ("m-keyed",)): 1,
        ("wai.queue.waiting_turn", ("m-keyed",)): 2,
    }  # no depth: no leader sampled any

    # the keyed jobs done, the queue says 0 rather than leave its last values standing
    await fetch(aclient, "DELETE FROM wai.jobs WHERE queue = 'm-keyed'")
    await aclient.set_queue_limits("m-rated")  # lifted: no token gauge any more
    await gauges.refresh()
    ours = {(s.name, s.labels): s.value for s in gauges.samples() if s.name.startswith("wai.queue")}
    assert ("wai.queue.rate_tokens", ("m-rated",)) not in ours
    assert ours[("wai.queue.keys_running", ("m-keyed",))] == 0
    assert ours[("wai.queue.waiting_turn", ("m-keyed",))] == 0

    # both exporters name them as the documentation does
    remove = METRICS.add_source(gauges.samples)
    try:
        exported = prometheus_samples()
    finally:
        remove()
    assert exported["wai_queue_global_concurrency"][(("queue", "m-limited"),)] == 5
    assert exported["wai_queue_keys_running"][(("queue", "m-keyed"),)] == 0
    assert 9.9 <= exported["wai_queue_rate_tokens"][(("queue", "m-limited"),)] <= 10


async def test_kind_rate_limit_gauges_per_queue_and_kind(aclient: wai.AsyncClient) -> None:
    await aclient.set_kind_rate_limit("m-pay", "charge", wai.RateLimit(10, per=1.0, burst=4))
    await aclient.set_kind_rate_limit("m-pay", "refund", wai.RateLimit(3, per=60.0))
    await aclient.set_queue_limits("m-both", global_concurrency=2)
    await aclient.set_kind_rate_limit("m-both", "charge", wai.RateLimit(5))
    # half a token left in refund's bucket, as a claim leaves it (refilling 0.05 a second)
    await fetch(
        aclient,
        "UPDATE wai.kind_limits SET rate_tokens = 0.5, rate_at = now()"
        " WHERE queue = 'm-pay' AND kind = 'refund'",
    )
    gauges = DatabaseGauges(aclient, interval=60)
    await gauges.refresh()

    def kinds() -> dict[Labels, float]:
        return {s.labels: s.value for s in gauges.samples() if s.name == "wai.kind.rate_tokens"}

    found = kinds()
    assert found.pop(("m-pay", "refund")) == pytest.approx(0.5, abs=0.05)
    assert found == {("m-both", "charge"): 1, ("m-pay", "charge"): 4}  # new buckets start full
    # a queue with only kind limits is listed with its queue's flow gauges too
    pay = {s.name: s.value for s in gauges.samples() if s.labels == ("m-pay",)}
    assert pay == {"wai.queue.keys_running": 0, "wai.queue.waiting_turn": 0}
    assert ("wai.queue.global_concurrency", ("m-both",)) in {
        (s.name, s.labels) for s in gauges.samples()
    }

    # a lifted kind limit leaves its gauge out; the other kinds' stay
    await aclient.set_kind_rate_limit("m-pay", "refund", None)
    await gauges.refresh()
    assert kinds() == {("m-both", "charge"): 1, ("m-pay", "charge"): 4}

    # both exporters name it as the documentation does
    remove = METRICS.add_source(gauges.samples)
    try:
        exported = prometheus_samples()
    finally:
        remove()
    assert exported["wai_kind_rate_tokens"] == {
        (("kind", "charge"), ("queue", "m-both")): 1,
        (("kind", "charge"), ("queue", "m-pay")): 4,
    }
