"""wai's metrics through OpenTelemetry (``opentelemetry-api``): the same figures as the
Prometheus endpoint, on the meter provider the application configured.

Imported through :mod:`wai._tracing`'s test for the package only (see :func:`bind`).
Counters are asynchronous instruments (``ObservableCounter``) whose callbacks read wai's
cumulative counts when the SDK collects, so an attempt costs OpenTelemetry nothing;
gauges are ``ObservableGauge`` read from the same sources as the Prometheus endpoint;
histograms are ``Histogram`` instruments fed with every observation, since the API has no
asynchronous histogram. Attributes are the metric's labels under the same names
(``queue``, ``kind``, ``state``, ``outcome``, ``reason``, ``instance_id``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from wai._metrics import Counter, Histogram, Labels, Metrics
from wai._version import __version__

__all__ = ["active", "bind"]

_lock = threading.Lock()
#: The provider wai's instruments were created on, and the metrics they read.
_bound: tuple[MeterProvider, Metrics] | None = None


def active() -> bool:
    """Whether an SDK meter provider is set (not the API's proxy or no-op one)."""
    provider = metrics.get_meter_provider()
    name = type(provider).__name__
    return name not in ("_ProxyMeterProvider", "NoOpMeterProvider")


def bind(source: Metrics, provider: MeterProvider | None = None) -> bool:
    """Create wai's instruments on ``provider`` (default: the global one, once an SDK set
    it); returns whether they exist now. Calling it again for the same provider does
    nothing; for another one (a test's new provider), the instruments move to it."""
    global _bound
    if provider is None:
        if not active():
            return False
        provider = metrics.get_meter_provider()
    with _lock:
        if _bound is not None and _bound[0] is provider and _bound[1] is source:
            return True
        meter = provider.get_meter("wai", __version__)
        for counter in source.counters.values():
            spec = counter.spec
            meter.create_observable_counter(
                spec.name, [_observe_counter(counter)], unit=spec.unit, description=spec.description
            )
        for name, spec in source.gauges.items():
            meter.create_observable_gauge(
                name, [_observe_gauges(source, name)], unit=spec.unit, description=spec.description
            )
        for histogram in source.histograms.values():
            spec = histogram.spec
            instrument = meter.create_histogram(
                spec.name,
                unit=spec.unit,
                description=spec.description,
                explicit_bucket_boundaries_advisory=list(spec.buckets),
            )
            histogram.on_observe = _recorder(histogram, instrument.record)
        _bound = (provider, source)
        source.exporters.add("otel")
    return True


def _attributes(names: tuple[str, ...], labels: Labels) -> dict[str, str]:
    return dict(zip(names, labels, strict=True))


def _observe_counter(
    counter: Counter,
) -> Callable[[CallbackOptions], Iterable[Observation]]:
    names = counter.spec.labels

    def callback(_options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(value, _attributes(names, labels))
            for labels, value in counter.snapshot().items()
        ]

    return callback


def _observe_gauges(
    source: Metrics, name: str
) -> Callable[[CallbackOptions], Iterable[Observation]]:
    names = source.gauges[name].labels

    def callback(_options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(sample.value, _attributes(names, sample.labels))
            for sample in source.gauge_samples()
            if sample.name == name
        ]

    return callback


def _recorder(histogram: Histogram, record: Callable[..., None]) -> Callable[[Labels, float], None]:
    names = histogram.spec.labels
    cache: dict[Labels, dict[str, str]] = {}

    def observe(labels: Labels, value: float) -> None:
        attributes = cache.get(labels)
        if attributes is None:
            if len(cache) > 10_000:  # bounded label sets; a guard all the same
                cache.clear()
            attributes = cache[labels] = _attributes(names, labels)
        record(value, attributes)

    return observe
