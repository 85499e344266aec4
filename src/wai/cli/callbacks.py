"""``wai callbacks serve``: the public HTTP ingress of external callbacks, for APP's client.

The server itself is :mod:`wai.callbacks.ingress` (an optional extra); this module checks the
signing secret, sets logging up (``--log-level``, ``--log-format``: :mod:`wai._logging`) and
loads APP before handing over.
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
from wai.cli._common import UsageError, err, group, int_in, logging_options, subparser

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands"]

_port = int_in(0, 65535, "a port number")


def add_commands(sub: SubParsers) -> None:
    """Add the ``callbacks`` command group to ``wai``'s subcommands."""
    callbacks = group(sub, "callbacks", "the public HTTP ingress of external callbacks")
    p = subparser(
        callbacks,
        "serve",
        "serve signed POST /callbacks/{id}/{action} requests with APP's client",
        _cmd_serve,
    )
    p.add_argument("app", metavar="APP", help="module:attribute naming a wai.AsyncClient")
    p.add_argument(
        "--secret-env",
        required=True,
        metavar="NAME",
        help="environment variable holding the signing secret (at least 32 bytes)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8080, help="port to bind (default 8080)")
    logging_options(p)


def _cmd_serve(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    from wai.callbacks.signing import check_secret

    value = os.environ.get(args.secret_env)
    if not value:
        raise UsageError(
            f"--secret-env {args.secret_env}: the environment variable is not set (or empty)"
        )
    secret = check_secret(value.encode())  # a short secret is a usage error (exit 2)
    try:
        from wai.callbacks.ingress import serve
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    configure_logging(args.log_level, args.log_format)  # before APP's import logs anything
    client, _url = load_runtime_app(args, stack)
    announce = functools.partial(err, prefix="")
    asyncio.run(serve(client, secret=secret, host=args.host, port=args.port, announce=announce))
    return 0
