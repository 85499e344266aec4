"""What the ``wai`` subcommands share: database options, parser plumbing, errors, prompts.

:mod:`wai.cli._main` builds the parser and runs a command; each command module of
:mod:`wai.cli` adds its commands with these helpers.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TextIO

import psycopg

from wai import _logging
from wai.client import Client
from wai.errors import DatabaseError

if TYPE_CHECKING:
    SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]  # pyright: ignore[reportPrivateUsage]

__all__ = [
    "Command",
    "ProgressBar",
    "UsageError",
    "add_database_options",
    "admin_client",
    "check_reachable",
    "configured_database_url",
    "confirm",
    "database_url",
    "embedded_database_url",
    "err",
    "fail",
    "first_line",
    "group",
    "int_in",
    "json_option",
    "limit",
    "logging_options",
    "number_in",
    "plural",
    "subparser",
    "timestamp",
    "yes_option",
]

Command = Callable[[argparse.Namespace, contextlib.ExitStack], int]


class UsageError(Exception):
    """A bad command line: reported with exit status 2."""


# -- the database ------------------------------------------------------------------------


def configured_database_url(args: argparse.Namespace) -> str | None:
    """--database-url, else WAI_DATABASE_URL, else DATABASE_URL; None when none is set."""
    url: str | None = (
        args.database_url or os.environ.get("WAI_DATABASE_URL") or os.environ.get("DATABASE_URL")
    )
    return url or None


def database_url(args: argparse.Namespace, stack: contextlib.ExitStack) -> str:
    """The configured URL (checked reachable), else an embedded server's (see below)."""
    url = configured_database_url(args)
    if url:
        check_reachable(url)
        return url
    return embedded_database_url(stack)


def embedded_database_url(stack: contextlib.ExitStack) -> str:
    """Start (or join) the embedded server, announced on stderr, until ``stack`` closes."""
    from wai import _embedded as embedded  # only when no URL is configured

    err("no database URL given (--database-url, WAI_DATABASE_URL or DATABASE_URL)", "")
    return stack.enter_context(embedded.embedded_database(announce=lambda m: err(m, "")))


def check_reachable(url: str) -> None:
    """Fail fast with the server's own message: the pool would retry for 30 s first."""
    try:
        psycopg.connect(url, connect_timeout=10).close()
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot connect to the database: {first_line(exc)}") from None


def admin_client(args: argparse.Namespace, stack: contextlib.ExitStack) -> Client:
    """An open one-connection :class:`wai.Client` for an operator command."""
    url = database_url(args, stack)
    return stack.enter_context(Client(url, schema=args.schema or "wai", max_connections=1))


# -- parser plumbing ----------------------------------------------------------------------


def add_database_options(parser: argparse.ArgumentParser, *, default: Any) -> None:
    """``--database-url`` and ``--schema``."""
    # Subcommands repeat these with SUPPRESS so `wai demo --database-url URL` works
    # too, without resetting a value given before the subcommand.
    parser.add_argument(
        "--database-url",
        metavar="URL",
        default=default,
        help="PostgreSQL URL (default: APP's client's own, $WAI_DATABASE_URL, "
        "$DATABASE_URL, else embedded)",
    )
    parser.add_argument(
        "--schema",
        metavar="NAME",
        default=default,
        help="schema of wai's tables (default: wai; for demo: wai_demo; "
        "with APP: APP's client's schema, which this must match)",
    )


def group(sub: SubParsers, name: str, text: str) -> SubParsers:
    """A command group (``wai jobs``, ``wai dlq``...) whose subcommands follow."""
    parser = sub.add_parser(name, help=text, description=text)
    add_database_options(parser, default=argparse.SUPPRESS)
    return parser.add_subparsers(title="commands", metavar="COMMAND", required=True)


def subparser(sub: SubParsers, name: str, text: str, command: Command) -> argparse.ArgumentParser:
    """A subcommand that runs ``command``."""
    parser = sub.add_parser(name, help=text, description=text)
    add_database_options(parser, default=argparse.SUPPRESS)
    parser.set_defaults(command=command)
    return parser


def json_option(parser: argparse.ArgumentParser) -> None:
    """``--json``."""
    parser.add_argument(
        "--json", action="store_true", help="print JSON (datetimes in ISO 8601) for scripts"
    )


def logging_options(parser: argparse.ArgumentParser) -> None:
    """``--log-level`` and ``--log-format`` of a long-running command (see :mod:`wai._logging`)."""
    from wai._logging import FORMATS, LEVELS

    parser.add_argument(
        "--log-level",
        choices=LEVELS,
        default="info",
        help="log wai's records from this level up (default info; other loggers: info "
        "or the level given, whichever is higher)",
    )
    parser.add_argument(
        "--log-format",
        choices=FORMATS,
        default="text",
        help="text lines, or one JSON object per line with time, level, logger, message "
        "and the job fields (default text); logs go to stderr",
    )


def yes_option(parser: argparse.ArgumentParser) -> None:
    """``--yes``: skip the confirmation of a destructive command."""
    parser.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="do not ask for confirmation (required when stdin is not a terminal)",
    )


def int_in(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argparse type: an integer (``what``) from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low}..{high}, got {text!r}")
        return value

    return parse


def number_in(low: float, high: float, what: str) -> Callable[[str], float]:
    """An argparse type: a finite number (``what``) from ``low`` to ``high``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if not low <= value <= high:  # NaN fails this too
            raise argparse.ArgumentTypeError(f"must be {low:g}..{high:g}, got {text!r}")
        return value

    return parse


limit = int_in(1, 10_000, "an integer")


def timestamp(text: str) -> datetime:
    """An argparse type: an ISO 8601 date and time with a UTC offset."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO 8601 date and time: {text!r} (e.g. 2026-05-01T12:00:00Z)"
        ) from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no UTC offset: add Z or +HH:MM (e.g. 2026-05-01T12:00:00Z)"
        )
    return value


_AGO = re.compile(r"([0-9]{1,9})(s|m|h|d)")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def moment(text: str) -> datetime:
    """An argparse type: an ISO 8601 date and time with a UTC offset, or a duration ago
    (``30s``, ``15m``, ``2h``, ``7d``) counted back from now."""
    ago = _AGO.fullmatch(text)
    if ago is None:
        return timestamp(text)
    seconds = int(ago.group(1)) * _UNITS[ago.group(2)]
    try:
        return datetime.now(UTC) - timedelta(seconds=seconds)
    except OverflowError:
        raise argparse.ArgumentTypeError(f"{text!r} ago is before the year 1") from None


# -- output -------------------------------------------------------------------------------


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when empty)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def err(message: object, prefix: str = "error: ") -> None:
    """``wai: <prefix><message>`` on stderr.

    Under ``--log-format json`` a record of ``wai.cli`` instead (:func:`wai._logging.say`):
    ERROR for an error, WARNING for a line that starts ``warning:``, else INFO.
    """
    text = str(message)
    if not _logging.json_lines():
        print(f"wai: {prefix}{text}", file=sys.stderr, flush=True)
    elif prefix == "error: ":
        _logging.say(text, logging.ERROR)
    elif text.startswith("warning: "):
        _logging.say(text.removeprefix("warning: "), logging.WARNING)
    else:
        _logging.say(prefix + text)


def fail(message: object, *, status: int = 1) -> int:
    """Report an error; returns ``status`` for the command to exit with."""
    err(message)
    return status


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 entry``, ``3 entries``."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"


def confirm(action: str, *, yes: bool, stdin: TextIO | None = None) -> bool:
    """Whether the operator agrees to ``action`` (``purge 3 entries``): a ``[y/N]`` prompt.

    ``--yes`` agrees without asking. Without it a terminal is asked (on stderr);
    anywhere else (a script, a pipe) nobody can answer, so the command stops with
    a :class:`UsageError` that says to pass ``--yes``.
    """
    if yes:
        return True
    stream = stdin if stdin is not None else sys.stdin
    if not stream.isatty():
        raise UsageError(f"not confirmed: pass --yes to {action} (stdin is not a terminal)")
    sys.stderr.write(f"wai: {action}? [y/N] ")
    sys.stderr.flush()
    return stream.readline().strip().lower() in ("y", "yes")


class ProgressBar:
    """Progress of a bulk action on stderr, with no dependency.

    On a terminal one line redraws in place (``\\r``); elsewhere (a log, a pipe)
    each update is a line of its own.
    """

    def __init__(
        self, label: str, total: int, *, stream: TextIO | None = None, width: int = 30
    ) -> None:
        self.label = label
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.tty = self.stream.isatty()
        self.done = 0
        self._drawn = False

    def line(self) -> str:
        """The progress text for ``self.done`` of ``self.total``."""
        # Capped: entries that arrive after the count can take done past total.
        fraction = min(self.done / self.total, 1.0) if self.total > 0 else 1.0
        percent = f"{int(fraction * 100):3d}%"
        count = f"{self.done}/{self.total}"
        if not self.tty:
            return f"wai: {self.label}: {count} ({percent.strip()})"
        filled = int(fraction * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        return f"wai: {self.label} [{bar}] {count} {percent}"

    def update(self, done: int) -> None:
        """Show that ``done`` items are done (the running total)."""
        self.done = done
        if self.tty:
            self.stream.write("\r" + self.line())
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()
        self._drawn = True

    def finish(self) -> None:
        """End the bar's line on a terminal (call once, after the last update)."""
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
