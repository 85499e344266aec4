"""wai's metrics in memory and in the Prometheus text format (no database), and the
documentation's table of them."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import wai.metrics
from wai import _prometheus
from wai._metrics import METRICS, SPECS, GaugeSample, Metrics, prometheus_name, spec_of

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def test_the_documentation_lists_every_metric_as_declared() -> None:
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in DOC.read_text().splitlines()
        if line.startswith("| `wai_")
    ]
    documented = {
        row[0].strip("`"): (row[1].strip("`"), row[2], row[3].strip("`"), row[4]) for row in rows
    }
    declared = {
        prometheus_name(s): (s.name, s.kind, s.unit, ", ".join(s.labels) or "—") for s in SPECS
    }
    assert documented == declared
    assert len(rows) == len(SPECS)


def test_names_follow_the_exporters_conventions() -> None:
    assert prometheus_name(spec_of("wai.jobs.completed")) == "wai_jobs_completed_total"
    assert prometheus_name(spec_of("wai.job.duration")) == "wai_job_duration_seconds"
    assert prometheus_name(spec_of("wai.queue.depth")) == "wai_queue_depth"
    for spec in SPECS:
        assert re.fullmatch(r"wai(\.[a-z_]+)+", spec.name), spec.name
        assert not {"job_id", "id"} & set(spec.labels)
        assert spec.description.strip()
        assert (spec.kind == "histogram") == bool(spec.buckets)
        assert list(spec.buckets) == sorted(spec.buckets)


def test_counters_and_histograms_accumulate_by_labels() -> None:
    m = Metrics()
    m.claimed.add(("q", "a"))
    m.claimed.add(("q", "a"), 2)
    m.claimed.add(("q", "b"))
    assert m.claimed.snapshot() == {("q", "a"): 3, ("q", "b"): 1}
    bounds = m.pickup_latency.bounds
    for value in (0.0, bounds[0], bounds[0] * 1.5, bounds[-1], bounds[-1] * 2, -3.0, math.nan):
        m.pickup_latency.observe(("q", "a"), value)
    got = m.pickup_latency.snapshot()[("q", "a")]
    assert got.count == 7
    assert got.buckets[0] == 4  # 0, the first bound itself (inclusive), and -3 and NaN as 0
    assert got.buckets[1] == 1
    assert got.buckets[len(bounds) - 1] == 1  # the last bound, inclusive
    assert got.buckets[-1] == 1  # above every bound
    assert math.isclose(got.total, bounds[0] * 2.5 + bounds[-1] * 3)


def test_observing_many_values_at_once_records_each_as_one_observation_would() -> None:
    one, many = Metrics(), Metrics()
    bounds = one.pickup_latency.bounds
    values = [0.0, bounds[0], bounds[0] * 1.5, bounds[-1] * 2, -3.0, math.nan]
    heard: list[tuple[tuple[str, ...], float]] = []
    many.pickup_latency.on_observe = lambda labels, value: heard.append((labels, value))
    for value in values:
        one.pickup_latency.observe(("q", "a"), value)
    many.pickup_latency.observe_many(("q", "a"), values)
    many.pickup_latency.observe_many(("q", "b"), [])  # nothing observed: no label set
    assert many.pickup_latency.snapshot() == one.pickup_latency.snapshot()
    assert [v for _, v in heard] == [0.0, bounds[0], bounds[0] * 1.5, bounds[-1] * 2, 0.0, 0.0]
    assert {labels for labels, _ in heard} == {("q", "a")}


def test_gauge_sources_keep_to_the_declared_gauges_and_a_broken_one_costs_only_itself() -> None:
    m = Metrics()

    def good() -> Iterator[GaugeSample]:
        yield GaugeSample("wai.outbox.pending", (), 3)
        yield GaugeSample("wai.queue.depth", ("q", "available"), 5)
        yield GaugeSample("wai.queue.depth", ("q",), 9)  # wrong label count: dropped
        yield GaugeSample("wai.nonsense", (), 1)  # not a declared gauge: dropped
        yield GaugeSample("wai.jobs.claimed", (), 1)  # a counter, not a gauge: dropped
        yield GaugeSample("wai.outbox.failed", (), math.nan)  # no value: dropped

    def broken() -> Iterator[GaugeSample]:
        raise RuntimeError("boom")

    remove = m.add_source(good)
    m.add_source(broken)
    assert [(s.name, s.labels, s.value) for s in m.gauge_samples()] == [
        ("wai.outbox.pending", (), 3),
        ("wai.queue.depth", ("q", "available"), 5),
    ]
    remove()
    remove()  # twice is harmless
    assert list(m.gauge_samples()) == []


def test_the_prometheus_text_holds_every_value_and_cumulative_buckets() -> None:
    m = Metrics()
    m.outcomes["completed"].add(("emails", "send"), 4)
    m.rescued.add(("emails", "send", "stale_heartbeat"))
    m.duration.observe(("emails", "send", "completed"), 0.003)
    m.duration.observe(("emails", "send", "completed"), 2.0)
    m.add_source(lambda: [GaugeSample("wai.queue.depth", ("emails", "available"), 12)])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_prometheus.WaiCollector(m))
    assert "prometheus" in m.exporters
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }
    send = (("kind", "send"), ("queue", "emails"))
    assert samples[("wai_jobs_completed_total", send)] == 4
    rescued = tuple(sorted((*send, ("reason", "stale_heartbeat"))))
    assert samples[("wai_jobs_rescued_total", rescued)] == 1
    labels = dict((*send, ("outcome", "completed")))

    def bucket(le: str) -> float:
        return samples[
            ("wai_job_duration_seconds_bucket", tuple(sorted({**labels, "le": le}.items())))
        ]

    assert bucket("0.001") == 0
    assert bucket("0.005") == 1
    assert bucket("1.0") == 1
    assert bucket("2.5") == 2
    assert bucket("+Inf") == 2
    key = tuple(sorted(labels.items()))
    assert samples[("wai_job_duration_seconds_count", key)] == 2
    assert math.isclose(samples[("wai_job_duration_seconds_sum", key)], 2.003)
    assert samples[("wai_queue_depth", (("queue", "emails"), ("state", "available")))] == 12


def test_the_public_collector_reads_the_process_metrics() -> None:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(wai.metrics.prometheus_collector())
    METRICS.claimed.add(("unit-public", "k"))
    text = generate_latest(registry).decode()
    assert 'wai_jobs_claimed_total{kind="k",queue="unit-public"}' in text
