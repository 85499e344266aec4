"""``wai embedded ...``: status, stop and reset of the embedded PostgreSQL.

One small function per subcommand over :mod:`wai._embedded`. The data directory is
the one every ``wai`` command uses when it gets no database URL
(:func:`wai._embedded.default_data_dir`: ``$WAI_EMBEDDED_DIR``, else
``$XDG_DATA_HOME/wai/pg``, else ``~/.local/share/wai/pg``; ``/var/lib/wai/pg`` as
root). None of these commands starts a server or needs a database URL.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from typing import TYPE_CHECKING

from wai import _embedded as embedded
from wai.cli import _tables
from wai.cli._common import confirm, err, json_option, yes_option

if TYPE_CHECKING:
    from wai.cli._common import Command, SubParsers

__all__ = ["add_commands", "human_size"]


def add_commands(sub: SubParsers) -> None:
    """Add the ``embedded`` command group to ``wai``'s subcommands."""
    text = "status, stop and reset of the embedded PostgreSQL (never starts it)"
    parser = sub.add_parser("embedded", help=text, description=text)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    p = _subcommand(
        commands,
        "status",
        "the data directory, the server running on it (pid, URL), its holders, its size",
        _cmd_status,
    )
    json_option(p)
    _subcommand(
        commands,
        "stop",
        "stop the server on the data directory, whichever wai processes hold it",
        _cmd_stop,
    )
    p = _subcommand(
        commands,
        "reset",
        "stop the server and delete the data directory (every job in it is lost)",
        _cmd_reset,
    )
    yes_option(p)


def _subcommand(
    commands: SubParsers, name: str, text: str, command: Command
) -> argparse.ArgumentParser:
    # Not _common.subparser: no --database-url / --schema, which would mean nothing here.
    parser = commands.add_parser(name, help=text, description=text)
    parser.set_defaults(command=command)
    return parser


def human_size(size: int) -> str:
    """``41.3 MB``: a byte count in decimal units."""
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")  # pragma: no cover


def _holders_text(holders: tuple[embedded.Holder, ...]) -> str:
    if not holders:
        return "none listed"
    return ", ".join(f"{h.pid} ({'running' if h.alive else 'exited'})" for h in holders)


def _cmd_status(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    st = embedded.status()
    if args.json:
        print(
            _tables.json_text(
                {
                    "data_dir": str(st.data_dir),
                    "exists": st.exists,
                    "pg_version": st.pg_version,
                    "running": st.running,
                    "pid": st.pid,
                    "url": st.url,
                    "holders": st.holders,
                    "size_bytes": st.size_bytes,
                    "log": str(st.log),
                }
            )
        )
        return 0
    rows: list[tuple[str, str]] = [("data directory", str(st.data_dir))]
    if not st.exists:
        rows.append(("state", "not created yet (the first wai command without a URL creates it)"))
    else:
        version = f"PostgreSQL {st.pg_version}" if st.pg_version else "not initialized"
        if st.running:
            answer = "" if st.url else ", not answering connections"
            server = f"running, pid {st.pid}{answer} ({version})"
        else:
            server = f"not running ({version})"
        rows += [
            ("server", server),
            ("url", st.url or "-"),
            ("holders", _holders_text(st.holders)),
            ("size on disk", human_size(st.size_bytes)),
            ("log", str(st.log)),
        ]
    print("\n".join(f"{name:<15} {value}" for name, value in rows))
    if args.database_url or os.environ.get("WAI_DATABASE_URL") or os.environ.get("DATABASE_URL"):
        err("a database URL is configured: wai commands use that database, not this one", "")
    return 0


def _cmd_stop(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    st = embedded.status()
    if not embedded.stop(st.data_dir):
        print(f"no embedded PostgreSQL runs in {st.data_dir}")
        return 0
    users = [str(h.pid) for h in st.holders if h.alive]
    held = f" (it was in use by wai process {', '.join(users)})" if users else ""
    print(f"stopped the embedded PostgreSQL in {st.data_dir}{held}")
    return 0


def _cmd_reset(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    st = embedded.status()
    if not st.exists:
        print(f"nothing to reset: {st.data_dir} does not exist")
        return 0
    stop_first = "stop its server, then " if st.running else ""
    action = (
        f"{stop_first}delete the embedded PostgreSQL data directory {st.data_dir} "
        f"({human_size(st.size_bytes)}, every job in it)"
    )
    if not confirm(action, yes=args.yes):
        err("aborted: nothing deleted", "")
        return 1
    embedded.reset(st.data_dir)
    print(
        f"deleted {st.data_dir} ({human_size(st.size_bytes)}): the next wai command "
        "without a database URL creates a fresh one"
    )
    return 0
