"""wai's metrics: what is counted and measured, held in memory (no I/O, no dependency).

Every metric is declared once in :data:`SPECS` — its OpenTelemetry name, type, unit,
labels and meaning — and the exporters read it from there: the Prometheus endpoint
(:mod:`wai._prometheus`), OpenTelemetry (:mod:`wai._otel_metrics`) and the
documentation's table (a test checks docs/observability.md against it).

Counters and histograms are process-wide (:data:`METRICS`), cumulative since the process
started, and recorded where the event happens: a dict increment under a lock, cheap
enough for every job. Gauges are read when an exporter collects, from the sources that
registered (a worker runtime, the sampler of the database's figures).

Labels are bounded: queue, kind, state, outcome, reason, instance_id — never a job id.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DURATION_BUCKETS",
    "METRICS",
    "SIZE_BUCKETS",
    "SPECS",
    "Counter",
    "GaugeSample",
    "GaugeSource",
    "Histogram",
    "HistogramValue",
    "MetricSpec",
    "Metrics",
    "prometheus_name",
]

Kind = Literal["counter", "histogram", "gauge"]

#: Seconds: from a millisecond to an hour, for durations and latencies.
DURATION_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0,
)  # fmt: skip

#: Counts of outcomes in one finalizer transaction.
SIZE_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric: its OpenTelemetry ``name``, type, unit (UCUM), labels and meaning."""

    name: str
    kind: Kind
    unit: str
    labels: tuple[str, ...]
    description: str
    buckets: tuple[float, ...] = ()


def prometheus_name(spec: MetricSpec) -> str:
    """The Prometheus name of ``spec``: dots become underscores, a unit in seconds adds
    ``_seconds``, and a counter ends in ``_total`` (as OpenTelemetry's Prometheus
    exporters name the same metric)."""
    name = spec.name.replace(".", "_")
    if spec.unit == "s":
        name += "_seconds"
    if spec.kind == "counter":
        name += "_total"
    return name


_QK = ("queue", "kind")

SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(
        "wai.jobs.inserted", "counter", "{job}", _QK,
        "Jobs inserted by this process (a unique job skipped as a duplicate is not), counted "
        "when the insert statement succeeds: a transaction of the caller's that rolls back "
        "afterwards was counted too. Follow-ups are counted in wai.followups.inserted.",
    ),
    MetricSpec("wai.jobs.claimed", "counter", "{job}", _QK, "Attempts this process claimed."),
    MetricSpec(
        "wai.jobs.completed", "counter", "{job}", _QK,
        "Jobs completed, counted when the outcome commits (an attempt whose lease went stale "
        "is not); callback resolutions this process committed included.",
    ),
    MetricSpec(
        "wai.jobs.retried", "counter", "{job}", _QK,
        "Attempts that failed and left the job to run again (committed).",
    ),
    MetricSpec(
        "wai.jobs.failed", "counter", "{job}", _QK,
        "Jobs failed for good: attempts exhausted or a terminal error (committed).",
    ),
    MetricSpec(
        "wai.jobs.cancelled", "counter", "{job}", _QK, "Jobs a handler cancelled (committed)."
    ),
    MetricSpec(
        "wai.jobs.snoozed", "counter", "{job}", _QK,
        "Attempts that snoozed (committed); an attempt a stopping worker put back, its "
        "attempt refunded, is no outcome and counts nowhere.",
    ),
    MetricSpec(
        "wai.jobs.parked", "counter", "{job}", _QK,
        "Attempts that parked their job to wait for an external callback (committed).",
    ),
    MetricSpec(
        "wai.jobs.rescued", "counter", "{job}", (*_QK, "reason"),
        "Attempts this process's maintenance rescued, by reason: stale_heartbeat, "
        "deadline_exceeded, callback_timeout.",
    ),
    MetricSpec(
        "wai.jobs.dead_lettered", "counter", "{job}", (*_QK, "reason"),
        "Failed jobs this process's finalizer moved to the dead-letter queue, by reason.",
    ),
    MetricSpec(
        "wai.followups.inserted", "counter", "{job}", (*_QK, "outcome"),
        "Follow-up jobs inserted with their trigger's outcome (queue and kind of the "
        "follow-up, outcome of the trigger), counted when the insert statement succeeds.",
    ),
    MetricSpec(
        "wai.job.duration", "histogram", "s", (*_QK, "outcome"),
        "How long attempts ran, from claim to the handler's return, by committed outcome.",
        DURATION_BUCKETS,
    ),
    MetricSpec(
        "wai.job.pickup_latency", "histogram", "s", _QK,
        "How long claimed jobs had been due (run_at to claim, both on the database's clock).",
        DURATION_BUCKETS,
    ),
    MetricSpec(
        "wai.finalizer.batch_size", "histogram", "{outcome}", (),
        "Outcomes written per finalizer transaction.",
        SIZE_BUCKETS,
    ),
    MetricSpec(
        "wai.finalizer.wait", "histogram", "s", (),
        "From the handler's return to the commit of its outcome, once per finalizer "
        "transaction: the wait of its oldest outcome.",
        DURATION_BUCKETS,
    ),
    MetricSpec(
        "wai.queue.depth", "gauge", "{job}", ("queue", "state"),
        "Unfinished jobs per queue and state (available, running, scheduled, retryable, "
        "waiting_external), from the maintenance leader's latest sample.",
    ),
    MetricSpec(
        "wai.queue.oldest_available_age", "gauge", "s", ("queue",),
        "How long the oldest available job of the queue has been due, from the leader's "
        "latest sample: the queue's lag.",
    ),
    MetricSpec(
        "wai.queue.rate_tokens", "gauge", "{token}", ("queue",),
        "Tokens in the bucket of a rate-limited queue now (a claim takes one per job; it "
        "refills at the limit's rate up to its burst): near 0, the rate limit holds the queue "
        "back. Only queues with a rate limit.",
    ),
    MetricSpec(
        "wai.queue.global_concurrency", "gauge", "{attempt}", ("queue",),
        "The most attempts of the queue that run at once across every process (compare "
        "wai.queue.depth with state running). Only queues with a global concurrency.",
    ),
    MetricSpec(
        "wai.queue.keys_running", "gauge", "{key}", ("queue",),
        "Ordering keys of the queue with an attempt running (one at a time per key).",
    ),
    MetricSpec(
        "wai.queue.waiting_turn", "gauge", "{job}", ("queue",),
        "Available jobs of the queue waiting for an earlier job of their ordering key to "
        "finish.",
    ),
    MetricSpec(
        "wai.kind.rate_tokens", "gauge", "{token}", ("queue", "kind"),
        "Tokens in the bucket of a kind with a rate limit of its own within the queue now (a "
        "claim takes one per job of the kind): near 0, the kind's rate limit holds its jobs "
        "back. Only kinds with a rate limit.",
    ),
    MetricSpec(
        "wai.outbox.pending", "gauge", "{row}", (),
        "Follow-up outbox rows waiting to be dispatched.",
    ),
    MetricSpec(
        "wai.outbox.failed", "gauge", "{row}", (),
        "Follow-up outbox rows that gave up (an operator retries or discards them).",
    ),
    MetricSpec("wai.dlq.depth", "gauge", "{job}", ("queue",), "Dead-lettered jobs per queue."),
    MetricSpec(
        "wai.worker.in_flight", "gauge", "{job}", ("queue",),
        "Attempts this process runs or has yet to write the outcome of.",
    ),
    MetricSpec(
        "wai.heartbeat.lag", "gauge", "s", (),
        "Seconds since this process's heartbeats last reached the database.",
    ),
    MetricSpec(
        "wai.pool.size", "gauge", "{connection}", (), "Connections this process's pool holds."
    ),
    MetricSpec(
        "wai.pool.available", "gauge", "{connection}", (), "Idle connections in the pool."
    ),
    MetricSpec(
        "wai.pool.waiting", "gauge", "{request}", (), "Requests waiting for a pool connection."
    ),
    MetricSpec(
        "wai.leader", "gauge", "1", ("instance_id",),
        "1 when this process (its instance id) is the maintenance leader, else 0.",
    ),
    MetricSpec(
        "wai.metrics.sampled_at", "gauge", "s", (),
        "Unix time of the last successful read of the database's figures (depth, outbox, "
        "dead letters, flow control): a stale value means those gauges are stale.",
    ),
)  # fmt: skip

_BY_NAME = {spec.name: spec for spec in SPECS}

Labels = tuple[str, ...]


class Counter:
    """A cumulative count per label values."""

    __slots__ = ("_lock", "spec", "values")

    def __init__(self, spec: MetricSpec) -> None:
        self.spec = spec
        self.values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def add(self, labels: Labels, n: float = 1) -> None:
        """Add ``n`` to the count of ``labels`` (in :attr:`MetricSpec.labels` order)."""
        with self._lock:
            values = self.values
            values[labels] = values.get(labels, 0) + n

    def snapshot(self) -> dict[Labels, float]:
        """The counts so far."""
        with self._lock:
            return dict(self.values)


@dataclass(frozen=True, slots=True)
class HistogramValue:
    """A histogram's state for one label set: per-bucket counts (not cumulative, the last
    one for values above every bound), the sum and the count of observations."""

    buckets: tuple[int, ...]
    total: float
    count: int


class Histogram:
    """Observations per label values, in fixed buckets (upper bounds, inclusive)."""

    __slots__ = ("_lock", "bounds", "on_observe", "spec", "values")

    def __init__(self, spec: MetricSpec) -> None:
        self.spec = spec
        self.bounds = spec.buckets
        self.values: dict[Labels, list[float]] = {}
        self._lock = threading.Lock()
        #: Called with every observation too (the OpenTelemetry bridge).
        self.on_observe: Callable[[Labels, float], None] | None = None

    def observe(self, labels: Labels, value: float) -> None:
        """Record ``value``; a NaN or negative value (clock skew) is recorded as 0."""
        self.observe_many(labels, (value,))

    def observe_many(self, labels: Labels, values: Sequence[float]) -> None:
        """Record each of ``values`` as :meth:`observe` does, under one lock."""
        if not values:
            return
        bounds = self.bounds
        with self._lock:
            slot = self.values.get(labels)
            if slot is None:
                # len(bounds) + 1 bucket counts, then the sum and the count.
                slot = self.values[labels] = [0.0] * (len(bounds) + 3)
            for value in values:
                if not value > 0:  # also NaN
                    value = 0.0
                slot[bisect.bisect_left(bounds, value)] += 1
                slot[-2] += value
            slot[-1] += len(values)
        hook = self.on_observe
        if hook is not None:
            for value in values:
                hook(labels, value if value > 0 else 0.0)

    def snapshot(self) -> dict[Labels, HistogramValue]:
        """Every label set's buckets, sum and count so far."""
        with self._lock:
            return {
                labels: HistogramValue(tuple(int(n) for n in slot[:-2]), slot[-2], int(slot[-1]))
                for labels, slot in self.values.items()
            }


@dataclass(frozen=True, slots=True)
class GaugeSample:
    """One gauge value: the metric's name, its labels (in the spec's order) and the value."""

    name: str
    labels: Labels
    value: float


#: What a gauge source gives when an exporter collects.
GaugeSource = Callable[[], Iterable[GaugeSample]]


class Metrics:
    """Every counter and histogram of the process, and the sources of its gauges."""

    def __init__(self, specs: Iterable[MetricSpec] = SPECS) -> None:
        self.counters: dict[str, Counter] = {}
        self.histograms: dict[str, Histogram] = {}
        self.gauges: dict[str, MetricSpec] = {}
        for spec in specs:
            if spec.kind == "counter":
                self.counters[spec.name] = Counter(spec)
            elif spec.kind == "histogram":
                self.histograms[spec.name] = Histogram(spec)
            else:
                self.gauges[spec.name] = spec
        #: The exporters reading these metrics ("prometheus", "otel"): while none does,
        #: the gauges that cost a query are not sampled.
        self.exporters: set[str] = set()
        self._sources: list[GaugeSource] = []
        self._sources_lock = threading.Lock()
        c, h = self.counters, self.histograms
        self.inserted = c["wai.jobs.inserted"]
        self.claimed = c["wai.jobs.claimed"]
        self.rescued = c["wai.jobs.rescued"]
        self.dead_lettered = c["wai.jobs.dead_lettered"]
        self.followups = c["wai.followups.inserted"]
        self.duration = h["wai.job.duration"]
        self.pickup_latency = h["wai.job.pickup_latency"]
        self.batch_size = h["wai.finalizer.batch_size"]
        self.finalizer_wait = h["wai.finalizer.wait"]
        #: The counter of each committed outcome event (:attr:`wai._outcomes.Outcome.event`).
        self.outcomes: Mapping[str, Counter] = {
            "completed": c["wai.jobs.completed"],
            "retried": c["wai.jobs.retried"],
            "exhausted": c["wai.jobs.failed"],
            "cancelled": c["wai.jobs.cancelled"],
            "snoozed": c["wai.jobs.snoozed"],
            "waiting_for_callback": c["wai.jobs.parked"],
        }

    def add_source(self, source: GaugeSource) -> Callable[[], None]:
        """Register a source of gauge samples; returns the function that removes it."""
        with self._sources_lock:
            self._sources.append(source)

        def remove() -> None:
            with self._sources_lock:
                if source in self._sources:
                    self._sources.remove(source)

        return remove

    def gauge_samples(self) -> Iterator[GaugeSample]:
        """Every registered source's samples, for gauges of :data:`SPECS` only; a source
        that raises gives none (a scrape never fails for one of them)."""
        with self._sources_lock:
            sources = list(self._sources)
        for source in sources:
            try:
                samples = list(source())
            except Exception:  # noqa: S112 - a broken source costs its own samples only
                continue
            for sample in samples:
                spec = self.gauges.get(sample.name)
                if (
                    spec is not None
                    and len(sample.labels) == len(spec.labels)
                    and not math.isnan(sample.value)
                ):
                    yield sample


def spec_of(name: str) -> MetricSpec:
    """The spec of metric ``name``."""
    return _BY_NAME[name]


#: The process's metrics.
METRICS = Metrics()
