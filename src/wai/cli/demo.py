"""``wai demo``: the signup flow of :mod:`wai._demo`, on its own schema (``wai_demo``).

With ``--serve`` it then serves the admin web UI on the demo's schema until a signal,
with the options and helpers of ``wai serve`` (:mod:`wai.cli.serve`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from wai.cli._common import UsageError, database_url, err, subparser
from wai.cli.serve import DEFAULT_HOST, DEFAULT_PORT, listen, server_options, token
from wai.client import AsyncClient

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands"]


def add_commands(sub: SubParsers) -> None:
    """Add ``demo`` to ``wai``'s subcommands."""
    p = subparser(
        sub, "demo", "a signup flow showing follow-ups committed with outcomes", _cmd_demo
    )
    p.add_argument(
        "--serve",
        action="store_true",
        help="then leave a few more jobs in other states and serve the admin web UI on the "
        "demo's schema until Ctrl-C, the database kept meanwhile (needs the http extra)",
    )
    server_options(p)


def _cmd_demo(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    from wai import _demo as demo  # only needed for `demo`

    if not args.serve and (args.host, args.port, args.token_env) != (
        DEFAULT_HOST,
        DEFAULT_PORT,
        None,
    ):
        raise UsageError("--host, --port and --token-env go with --serve")
    sock = _listen(args, stack) if args.serve else None  # a port in use fails right away
    url = database_url(args, stack)
    schema = args.schema or demo.SCHEMA
    web_ui = None if sock is None else functools.partial(_serve_ui, args, sock, url, schema)
    # A closed stdout (`wai demo | head`) raises BrokenPipeError out of here once the
    # demo has stopped its workers; main() handles it like for every command.
    return asyncio.run(demo.run(url, schema=schema, serve=web_ui))


def _listen(args: argparse.Namespace, stack: contextlib.ExitStack) -> socket.socket:
    """The socket ``--serve`` will serve on, taken before the demo runs."""
    try:
        importlib.import_module("wai.web._serve")  # the http extra, before the demo runs
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    return stack.enter_context(listen(args))


async def _serve_ui(
    args: argparse.Namespace,
    sock: socket.socket,
    url: str,
    schema: str,
    ready: Callable[[str], None],
) -> None:
    """Serve the admin API and web UI on the demo's schema until SIGTERM or Ctrl-C."""
    from wai.web._serve import serve

    await serve(
        AsyncClient(url, schema=schema),
        token=token(args),
        host=args.host,
        port=args.port,
        sock=sock,
        announce=functools.partial(err, prefix=""),
        ready=ready,
    )
