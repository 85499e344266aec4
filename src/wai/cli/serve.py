"""``wai serve [APP]``: the admin web UI and HTTP API (JSON under ``/api/v1/``), and the
health probes.

The server itself is :mod:`wai.web` (an optional extra); this module settles the
token and the client before handing over. Mutations are enabled only when
``--token-env NAME`` names a set, non-empty variable; otherwise the API is
read-only, and the command says so.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
from typing import TYPE_CHECKING

from wai._logging import configure as configure_logging
from wai.cli._app import load_runtime_app
from wai.cli._common import UsageError, database_url, err, int_in, logging_options, subparser
from wai.client import AsyncClient

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands"]

_port = int_in(0, 65535, "a port number")


def add_commands(sub: SubParsers) -> None:
    """Add ``serve`` to ``wai``'s subcommands."""
    p = subparser(
        sub,
        "serve",
        "serve the admin web UI (at /) and HTTP API (JSON under /api/v1/, schema at "
        "/api/v1/openapi.json) "
        "and /healthz, /readyz",
        _cmd_serve,
    )
    p.add_argument(
        "app",
        nargs="?",
        metavar="APP",
        help="module:attribute naming a wai.AsyncClient (its database and schema); "
        "without it, a bare client on the database URL",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port to bind (default 8000)")
    p.add_argument(
        "--token-env",
        metavar="NAME",
        help="environment variable holding the bearer token that mutations need; without "
        "it, or when it is unset or empty, the API is read-only (mutations answer 403)",
    )
    logging_options(p)


def _token(args: argparse.Namespace) -> str | None:
    """The token from ``--token-env``, or None (read-only), said on stderr."""
    if args.token_env is None:
        err("no --token-env: serving read-only, mutations answer 403", "")
        return None
    token = os.environ.get(args.token_env, "")
    if not token.strip():
        err(
            f"--token-env {args.token_env}: the variable is not set (or empty): serving "
            "read-only, mutations answer 403",
            "",
        )
        return None
    return token


def _cmd_serve(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    try:
        from wai.web._serve import serve
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    configure_logging(args.log_level, args.log_format)  # before APP's import logs anything
    token = _token(args)
    if args.app is not None:
        client, _url = load_runtime_app(args, stack)
    else:
        client = AsyncClient(database_url(args, stack), schema=args.schema or "wai")
    announce = functools.partial(err, prefix="")
    asyncio.run(serve(client, token=token, host=args.host, port=args.port, announce=announce))
    return 0
