"""wai's metrics in Prometheus's text format (``prometheus-client``, the ``metrics`` extra).

A collector reads :data:`wai._metrics.METRICS` when scraped, on a registry of wai's own
(the application's default registry is left alone, unless it asks:
``prometheus_client.REGISTRY.register(wai.metrics_collector())``, see
docs/observability.md). Names follow :func:`wai._metrics.prometheus_name`.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from wai._metrics import METRICS, Metrics, prometheus_name

__all__ = ["CONTENT_TYPE", "WaiCollector", "registry", "render"]

#: The content type of :func:`render`'s output.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class WaiCollector(Collector):
    """Every wai metric of ``source`` as Prometheus metric families."""

    def __init__(self, source: Metrics = METRICS) -> None:
        self._source = source
        source.exporters.add("prometheus")

    def collect(self) -> Iterator[Metric]:
        """The families, in :data:`wai._metrics.SPECS` order."""
        source = self._source
        for counter in source.counters.values():
            spec = counter.spec
            family = CounterMetricFamily(
                prometheus_name(spec).removesuffix("_total"),
                spec.description,
                labels=spec.labels,
            )
            for labels, value in sorted(counter.snapshot().items()):
                family.add_metric(labels, value)
            yield family
        for histogram in source.histograms.values():
            spec = histogram.spec
            family = HistogramMetricFamily(
                prometheus_name(spec), spec.description, labels=spec.labels
            )
            bounds = [*(_bound(b) for b in histogram.bounds), "+Inf"]
            for labels, value in sorted(histogram.snapshot().items()):
                cumulative: list[tuple[str, float]] = []
                running = 0
                for bound, count in zip(bounds, value.buckets, strict=True):
                    running += count
                    cumulative.append((bound, float(running)))
                family.add_metric(labels, cumulative, value.total)
            yield family
        samples = list(source.gauge_samples())
        for name, spec in source.gauges.items():
            family = GaugeMetricFamily(prometheus_name(spec), spec.description, labels=spec.labels)
            for sample in samples:
                if sample.name == name:
                    family.add_metric(sample.labels, sample.value)
            yield family


def _bound(value: float) -> str:
    """A bucket bound as Prometheus writes it (``0.005``, ``1.0``)."""
    return repr(float(value))


def registry(source: Metrics = METRICS) -> CollectorRegistry:
    """A registry holding only wai's collector."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(WaiCollector(source))
    return reg


def render(reg: CollectorRegistry) -> bytes:
    """The registry's metrics in the Prometheus text format."""
    return generate_latest(reg)
