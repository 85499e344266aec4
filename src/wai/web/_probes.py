"""The probe server of ``wai worker --metrics-port``: ``/metrics``, ``/healthz`` and
``/readyz`` on a port of their own, served by uvicorn in the worker's event loop.

The worker owns the process's signals (its graceful shutdown); this server installs
none and stops when the worker has.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

from wai.client import AsyncClient
from wai.web._health import health_routes
from wai.web._metrics_route import metrics_route

try:
    import uvicorn
    from starlette.applications import Starlette
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("--metrics-port needs the metrics extra: pip install 'wai[metrics]'") from exc

__all__ = ["ProbeServer", "probe_app"]


def probe_app(client: AsyncClient) -> Starlette:
    """``/metrics``, ``/healthz`` and ``/readyz`` of ``client``'s process."""
    return Starlette(routes=[metrics_route(), *health_routes(client)])


class _QuietServer(uvicorn.Server):
    """uvicorn's server without signal handlers: the worker handles SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ProbeServer:
    """Serves :func:`probe_app` on ``sock`` from :meth:`start` until :meth:`stop`."""

    def __init__(self, client: AsyncClient, sock: socket.socket) -> None:
        self._sock = sock
        config = uvicorn.Config(
            probe_app(client),
            lifespan="off",
            server_header=False,
            log_config=None,  # its records go through the logging the command configured
            access_log=False,  # a probe every few seconds is not news
        )
        self._server = _QuietServer(config)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start serving in the background."""
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]))

    async def stop(self) -> None:
        """Stop answering and wait for the server to close."""
        self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):  # it failed already: nothing left to stop
                await self._task
        self._sock.close()
