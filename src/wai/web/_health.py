"""``GET /healthz`` (the process is live) and ``GET /readyz`` (it is ready), answered from
:meth:`wai.AsyncClient.health`: 200, or 503, with the :class:`wai.Health` as JSON.

Served by ``wai serve`` next to the API, and by ``wai worker --metrics-port`` next to
``/metrics`` (docs/observability.md, "Health").
"""

from __future__ import annotations

import logging
from typing import Final

from wai._health import Health
from wai._jsonable import jsonable
from wai._logging import emit
from wai.client import AsyncClient
from wai.web._encode import json_response

try:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("wai.web needs the http extra: pip install 'wai[http]'") from exc

__all__ = ["READY_TIMEOUT", "health_routes"]

logger = logging.getLogger("wai.web")

#: Seconds the database check of a probe may take before it reports no answer.
READY_TIMEOUT: Final = 2.0


def _answer(health: Health, ok: bool) -> Response:
    return json_response(jsonable(health), 200 if ok else 503, {"Cache-Control": "no-store"})


def health_routes(client: AsyncClient, *, timeout: float = READY_TIMEOUT) -> list[Route]:
    """The two probes of ``client``'s process."""
    reported: set[str] = set()

    async def check() -> Health:
        health = await client.health(timeout=timeout)
        # Each new problem once, at WARNING: a probe every few seconds must not flood the log.
        for problem in health.problems:
            if problem not in reported:
                emit(logger, logging.WARNING, "wai: health: %s", problem)
        reported.clear()
        reported.update(health.problems)
        return health

    async def healthz(request: Request) -> Response:
        health = await check()
        return _answer(health, health.live)

    async def readyz(request: Request) -> Response:
        health = await check()
        return _answer(health, health.ready)

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]
