"""``wai serve [APP]``: the admin web UI and HTTP API (JSON under ``/api/v1/``), and the
health probes.

The server itself is :mod:`wai.web` (an optional extra); this module settles the
socket, the token and the client before handing over. Mutations are enabled only
when ``--token-env NAME`` names a set, non-empty variable; otherwise the API is
read-only, and the command says so. ``wai demo --serve`` takes the same options,
with the helpers below.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import functools
import os
import socket
from typing import TYPE_CHECKING

from wai._logging import configure as configure_logging
from wai.cli._app import load_runtime_app
from wai.cli._common import UsageError, database_url, err, int_in, logging_options, subparser
from wai.client import AsyncClient
from wai.errors import WaiError

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "add_commands",
    "listen",
    "listen_on",
    "server_options",
    "token",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
_port = int_in(0, 65535, "a port number")


def add_commands(sub: SubParsers) -> None:
    """Add ``serve`` to ``wai``'s subcommands."""
    p = subparser(
        sub,
        "serve",
        "serve the admin web UI (at /) and HTTP API (JSON under /api/v1/, schema at "
        "/api/v1/openapi.json) "
        "and /metrics, /healthz, /readyz",
        _cmd_serve,
    )
    p.add_argument(
        "app",
        nargs="?",
        metavar="APP",
        help="module:attribute naming a wai.AsyncClient (its database and schema); "
        "without it, a bare client on the database URL",
    )
    server_options(p)
    logging_options(p)


def server_options(parser: argparse.ArgumentParser) -> None:
    """``--host``, ``--port`` and ``--token-env`` of a command serving the admin API."""
    parser.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})"
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        help=f"port to bind (default {DEFAULT_PORT}; 0: a free one, announced)",
    )
    parser.add_argument(
        "--token-env",
        metavar="NAME",
        help="environment variable holding the bearer token that mutations need; without "
        "it, or when it is unset or empty, the API is read-only (mutations answer 403)",
    )


def listen(args: argparse.Namespace) -> socket.socket:
    """A socket listening on ``--host``/``--port``; an address in use is a plain error."""
    return listen_on(args.host, args.port, flag="--port")


def listen_on(host: str, port: int, *, flag: str) -> socket.socket:
    """A socket listening on ``host:port``; an address in use is a plain error naming
    ``flag``, the option that chooses another port."""
    from wai._http_server import listening_socket  # the http extra, checked by the caller

    try:
        return listening_socket(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            reason = f"the address is already in use (another server?): pass another {flag}"
        else:
            reason = exc.strerror or str(exc)
        raise WaiError(f"cannot listen on {host}:{port}: {reason}") from None


def token(args: argparse.Namespace) -> str | None:
    """The token from ``--token-env``, or None (read-only), said on stderr."""
    if args.token_env is None:
        err("no --token-env: serving read-only, mutations answer 403", "")
        return None
    value = os.environ.get(args.token_env, "")
    if not value.strip():
        err(
            f"--token-env {args.token_env}: the variable is not set (or empty): serving "
            "read-only, mutations answer 403",
            "",
        )
        return None
    return value


def _cmd_serve(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    try:
        from wai.web._serve import serve
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    configure_logging(args.log_level, args.log_format)  # before APP's import logs anything
    sock = stack.enter_context(listen(args))  # a port in use fails before anything starts
    bearer = token(args)
    if args.app is not None:
        client, _url = load_runtime_app(args, stack)
    else:
        client = AsyncClient(database_url(args, stack), schema=args.schema or "wai")
    announce = functools.partial(err, prefix="")
    asyncio.run(
        serve(client, token=bearer, host=args.host, port=args.port, sock=sock, announce=announce)
    )
    return 0
