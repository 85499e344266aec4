"""``GET /healthz`` (the process answers) and ``GET /readyz`` (the database answers, migrated).

Served by ``wai serve`` next to the API; a host application that mounts the API has
probes of its own.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

import psycopg
from psycopg_pool import PoolTimeout

from wai.client import AsyncClient
from wai.errors import DatabaseError, SchemaNotMigrated
from wai.web._encode import json_response

try:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("wai.web needs the http extra: pip install 'wai[http]'") from exc

__all__ = ["READY_TIMEOUT", "health_routes"]

logger = logging.getLogger("wai.web")

#: Seconds ``/readyz`` waits for the database before it answers 503.
READY_TIMEOUT: Final = 5.0


def _unready(code: str, message: str) -> Response:
    body = {"status": "unavailable", "error": {"code": code, "message": message}}
    return json_response(body, 503)


def health_routes(client: AsyncClient, *, timeout: float = READY_TIMEOUT) -> list[Route]:
    """The two probes of ``client``'s process."""

    async def healthz(request: Request) -> Response:
        return json_response({"status": "ok"})

    async def readyz(request: Request) -> Response:
        try:
            await asyncio.wait_for(client.check_schema(), timeout)
        except SchemaNotMigrated as exc:
            return _unready("schema_not_migrated", str(exc))
        except (TimeoutError, DatabaseError, psycopg.Error, PoolTimeout, OSError) as exc:
            logger.warning("readyz: the database does not answer: %s", exc or type(exc).__name__)
            return _unready("database_unavailable", "the database does not answer")
        return json_response({"status": "ready"})

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]
