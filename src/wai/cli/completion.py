"""``wai completion SHELL``: a shell completion script for ``wai``, built by shtab."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import TYPE_CHECKING

from wai.cli._common import subparser
from wai.errors import WaiError

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands"]

_SHELLS = ("bash", "zsh", "tcsh")


def add_commands(sub: SubParsers) -> None:
    """Add ``completion`` to ``wai``'s subcommands."""
    p = subparser(
        sub,
        "completion",
        "print a completion script for SHELL (e.g. `wai completion bash > "
        "~/.local/share/bash-completion/completions/wai`)",
        _cmd_completion,
    )
    p.add_argument("shell", metavar="SHELL", choices=_SHELLS, help=", ".join(_SHELLS))


def _cmd_completion(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    from wai.cli._main import build_parser  # the whole parser, which imports this module

    try:
        import shtab  # only needed here
    except ImportError:
        raise WaiError("shell completion needs the shtab package: pip install shtab") from None
    sys.stdout.write(shtab.complete(build_parser(), shell=args.shell))
    return 0
