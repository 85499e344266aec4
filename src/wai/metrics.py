"""wai's metrics for an application's own exporters (docs/observability.md, "Metrics").

``wai worker --metrics-port`` and ``wai serve`` serve them already. An application
that runs its workers in its own process (``client.run()`` next to a web app) can add
them to the endpoint it serves, or to a meter provider it keeps to itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wai._metrics import METRICS

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from prometheus_client.registry import Collector

__all__ = ["bind_meter_provider", "prometheus_collector"]


def prometheus_collector() -> Collector:
    """A ``prometheus_client`` collector of every wai metric of this process.

    Register it on the registry your endpoint serves:
    ``prometheus_client.REGISTRY.register(wai.metrics.prometheus_collector())``.
    Needs ``prometheus-client`` (``pip install 'wai[metrics]'``). From then on, the
    worker runtimes of this process read the database's gauges every
    ``metrics_interval`` seconds.
    """
    from wai._prometheus import WaiCollector

    return WaiCollector(METRICS)


def bind_meter_provider(provider: MeterProvider) -> None:
    """Create wai's instruments on ``provider``, an OpenTelemetry meter provider that is
    not the global one (the global one is bound by the worker runtime on its own).

    Needs ``opentelemetry-api`` (``pip install 'wai[otel]'``).
    """
    from wai import _otel_metrics

    _otel_metrics.bind(METRICS, provider)
