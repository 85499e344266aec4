"""``wai demo``: the signup flow of :mod:`wai._demo`, on its own schema (``wai_demo``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import TYPE_CHECKING

from wai.cli._common import database_url, subparser

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands"]


def add_commands(sub: SubParsers) -> None:
    """Add ``demo`` to ``wai``'s subcommands."""
    subparser(sub, "demo", "a signup flow showing follow-ups committed with outcomes", _cmd_demo)


def _cmd_demo(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    from wai import _demo as demo  # only needed for `demo`

    url = database_url(args, stack)
    # A closed stdout (`wai demo | head`) raises BrokenPipeError out of here once the
    # demo has stopped its workers; main() handles it like for every command.
    return asyncio.run(demo.run(url, schema=args.schema or demo.SCHEMA))
