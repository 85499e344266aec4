"""``serve``: run the callback ingress of a client with uvicorn until SIGTERM or SIGINT."""

from __future__ import annotations

from collections.abc import Callable

from wai.callbacks.ingress._app import DEFAULT_MAX_BODY, create_callback_app
from wai.callbacks.signing import DEFAULT_TOLERANCE
from wai.client import AsyncClient

try:
    import uvicorn

    from wai._http_server import SignalServer
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("wai callbacks serve needs the http extra: pip install 'wai[http]'") from exc

__all__ = ["serve"]


async def serve(
    client: AsyncClient,
    *,
    secret: bytes,
    host: str = "127.0.0.1",
    port: int = 8080,
    max_body: int = DEFAULT_MAX_BODY,
    tolerance: float = DEFAULT_TOLERANCE,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Open ``client``, check its schema, and serve its callback ingress until a signal.

    Binds ``host:port``; ``announce`` receives a one-line banner once the schema
    is checked. SIGTERM or SIGINT stop accepting connections, let open requests
    finish, then close the client. uvicorn logs (``uvicorn.error``, ``uvicorn.access``)
    through the process's logging configuration; it sets up none of its own.
    """
    app = create_callback_app(client, secret=secret, max_body=max_body, tolerance=tolerance)
    # log_config=None: uvicorn's records go through the logging the caller configured
    # (``wai callbacks serve``: --log-format), as every other record of the process.
    config = uvicorn.Config(
        app, host=host, port=port, lifespan="off", server_header=False, log_config=None
    )
    server = SignalServer(config)
    async with client:
        await client.check_schema()
        if announce is not None:
            announce(
                f"callback ingress on http://{host}:{port}/callbacks/{{id}}/{{action}}, "
                f"schema {client.schema!r}, until SIGTERM or Ctrl-C"
            )
        await server.serve()
