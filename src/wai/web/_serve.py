"""``serve``: the admin API and the health probes of a client, run by uvicorn until a signal."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable

from wai._gauges import DatabaseGauges, pool_gauges
from wai._metrics import METRICS
from wai.client import AsyncClient
from wai.errors import SchemaNotMigrated
from wai.web._app import create_app
from wai.web._endpoint import API_PREFIX
from wai.web._health import health_routes

try:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import BaseRoute, Mount

    from wai._http_server import SignalServer, listening_socket
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("wai serve needs the http extra: pip install 'wai[http]'") from exc

__all__ = ["METRICS_INTERVAL", "serve", "server_app"]

#: Seconds between two reads of the database's figures for /metrics.
METRICS_INTERVAL = 15.0


def server_app(client: AsyncClient, *, token: str | None) -> Starlette:
    """``/healthz``, ``/readyz``, ``/metrics`` (with the metrics extra), and the API and its
    web UI at the root; mutations only with ``token`` (its bearer header, or a browser
    session signed in with it)."""
    api = create_app(client, token=token, read_only=token is None)
    routes: list[BaseRoute] = [*health_routes(client)]
    try:
        from wai.web._metrics_route import metrics_route
    except ImportError:
        pass  # no prometheus-client: no /metrics (the command says so)
    else:
        routes.append(metrics_route())
    return Starlette(routes=[*routes, Mount("", app=api)])


async def serve(
    client: AsyncClient,
    *,
    token: str | None,
    host: str = "127.0.0.1",
    port: int = 8000,
    sock: socket.socket | None = None,
    announce: Callable[[str], None] | None = None,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Open ``client``, serve its admin API until SIGTERM or SIGINT, close it.

    It serves on ``sock``, a listening socket (see
    :func:`wai._http_server.listening_socket`), else on one it opens on
    ``host:port``. Without ``token`` the API is read-only. A schema that is not
    migrated is announced and served anyway: ``/readyz`` answers 503 until it is.
    ``announce`` receives the warnings and a line saying where it serves, and
    ``ready`` the web UI's URL, once requests to it are answered (or wait for it).
    """
    if sock is None:
        sock = listening_socket(host, port)
    port = int(sock.getsockname()[1])  # the one port 0 got
    app = server_app(client, token=token)
    # log_config=None: uvicorn's records go through the logging the command configured.
    config = uvicorn.Config(
        app, host=host, port=port, lifespan="off", server_header=False, log_config=None
    )
    server = SignalServer(config)
    gauges = DatabaseGauges(client, interval=METRICS_INTERVAL)
    unregister = [METRICS.add_source(gauges.samples)]
    sampling: asyncio.Task[None] | None = None
    try:
        async with client:
            unregister.append(METRICS.add_source(pool_gauges(client.pool)))
            sampling = asyncio.create_task(gauges.run_forever(), name="wai-metrics")
            try:
                await client.check_schema()
            except SchemaNotMigrated as exc:
                if announce is not None:
                    announce(f"warning: {exc}; /readyz answers 503 until then")
            where = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
            mode = "read-only" if token is None else "mutations need the bearer token or a session"
            if announce is not None:
                announce(
                    f"admin API on {where}{API_PREFIX}/ and its web UI on {where}/ ({mode}), "
                    f"schema {client.schema!r}, until SIGTERM or Ctrl-C"
                )
            if ready is not None:
                ready(f"{where}/")
            try:
                await server.serve(sockets=[sock])
            finally:
                sampling.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sampling
    finally:
        for remove in unregister:
            remove()
        sock.close()  # uvicorn closes it too, once it has served on it
