"""``GET /metrics``: wai's metrics in Prometheus's text format (the ``metrics`` extra).

Served by ``wai serve`` and by ``wai worker --metrics-port``. The database's gauges
(queue depth and lag, outbox, dead letters) are read on a cadence by the process's
:class:`wai._gauges.DatabaseGauges`, never on the scrape itself.
"""

from __future__ import annotations

try:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from wai import _prometheus
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "the /metrics endpoint needs the metrics extra: pip install 'wai[metrics]'"
    ) from exc

__all__ = ["metrics_route"]


def metrics_route() -> Route:
    """``GET /metrics`` over the process's metrics (:data:`wai._metrics.METRICS`)."""
    registry = _prometheus.registry()

    async def metrics(request: Request) -> Response:
        return Response(_prometheus.render(registry), media_type=_prometheus.CONTENT_TYPE)

    return Route("/metrics", metrics, methods=["GET"])
