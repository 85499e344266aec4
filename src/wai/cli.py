"""The ``wai`` command line: argparse, one small function per subcommand over the public API.

The database comes from ``--database-url``, else ``WAI_DATABASE_URL``, else
``DATABASE_URL``; with none, an embedded PostgreSQL is started (and announced on
stderr, see :mod:`wai.embedded`). Exit codes: 0 success, 1 failure (a failed
``--check``, an unreachable database, a wai error), 2 usage error (bad options, a
bad ``APP``). Errors print ``wai: error: ...`` on stderr, without a traceback for
wai's own errors and connection failures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from wai import migrate
from wai.client import AsyncClient, Client
from wai.errors import DatabaseError, ValidationError, WaiError

__all__ = ["build_parser", "main"]

Command = Callable[[argparse.Namespace, contextlib.ExitStack], int]

_TIMINGS = (
    ("poll_interval", "how often an idle queue is polled without a NOTIFY"),
    ("heartbeat_interval", "how often running jobs refresh their heartbeat"),
    ("heartbeat_staleness", "heartbeat age after which a job is rescued"),
    ("rescue_interval", "how often the leader looks for stale jobs"),
    ("promote_interval", "how often the leader promotes due scheduled/retryable jobs"),
    ("election_interval", "how often leadership is renewed or sought"),
)


class UsageError(Exception):
    """A bad command line: reported with exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``wai`` command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    command: Command = args.command
    try:
        with contextlib.ExitStack() as stack:
            return command(args, stack)
    except (UsageError, ValidationError) as exc:
        return _fail(exc, status=2)
    except WaiError as exc:
        return _fail(exc)
    except psycopg.OperationalError as exc:
        return _fail(f"lost the database connection: {_first_line(exc)}")
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``wai`` and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="wai", description="wai: a PostgreSQL-native background job queue."
    )
    _add_database_options(parser, default=None)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    p = _subparser(sub, "migrate", "apply pending schema migrations", _cmd_migrate)
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--check", action="store_true", help="exit 1 listing pending migrations; apply nothing"
    )
    mode.add_argument(
        "--sql", action="store_true", help="print every migration as SQL; touch no database"
    )

    p = _subparser(sub, "worker", "run workers (and maintenance) for APP", _cmd_worker)
    p.add_argument("app", metavar="APP", help="module:attribute naming a wai.AsyncClient")
    p.add_argument(
        "--queue",
        "-q",
        metavar="NAME[=N]",
        action="append",
        default=[],
        help="serve queue NAME with concurrency N (default 10); repeatable. "
        "Default: every queue a task is registered on",
    )
    p.add_argument("--burst", action="store_true", help="exit once the queues are empty")
    p.add_argument(
        "--no-maintenance",
        dest="maintenance",
        action="store_false",
        help="leave promotion, rescue and the other leader services to other processes",
    )
    p.add_argument(
        "--shutdown-timeout",
        type=_seconds,
        default=10.0,
        metavar="S",
        help="seconds running jobs get to finish on SIGTERM/SIGINT (default 10)",
    )
    for name, text in _TIMINGS:
        flag = "--" + name.replace("_", "-")
        p.add_argument(flag, dest=name, type=_seconds, metavar="S", help=f"seconds: {text}")

    _subparser(sub, "demo", "run a small signup example end to end", _cmd_demo)
    return parser


# -- subcommands -----------------------------------------------------------------------


def _cmd_migrate(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    schema: str = args.schema or "wai"
    if args.sql:
        sys.stdout.write(migrate.script(schema))
        return 0
    url = _database_url(args, stack)
    with Client(url, schema=schema, max_connections=1) as client:
        if args.check:
            pending = client.pending_migrations()
            if pending:
                versions = ", ".join(str(v) for v in pending)
                _err(f"schema {schema!r} has pending migrations: {versions}; run `wai migrate`")
                return 1
            print(f"schema {schema!r} is up to date")
            return 0
        applied = client.migrate()
    if applied:
        print(f"schema {schema!r}: applied migrations {', '.join(str(v) for v in applied)}")
    else:
        print(f"schema {schema!r} is already up to date")
    return 0


def _cmd_worker(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    from wai._app import load_app, parse_app  # imports user code: only for `worker`

    parse_app(args.app)  # a malformed APP fails before any database is started
    queues = _parse_queues(args.queue)
    url = _database_url(args, stack)
    # A client built at import without a URL reads WAI_DATABASE_URL: give it ours.
    os.environ["WAI_DATABASE_URL"] = url
    try:
        client = load_app(args.app)
    except WaiError:
        raise
    except Exception:
        traceback.print_exc()
        _err(f"importing APP {args.app!r} failed (traceback above)")
        return 1
    if args.database_url and client.database_url != args.database_url:
        raise UsageError(f"{args.app} uses its own database URL, not the --database-url given")
    if args.schema and client.schema != args.schema:
        raise UsageError(f"{args.app} uses schema {client.schema!r}, not --schema {args.schema!r}")
    if client.database_url != url:  # APP's client names its own database
        _check_reachable(client.database_url)
    served = ", ".join(queues or client.registry.queues()) or "(none)"
    mode = "until the queues are empty" if args.burst else "until SIGTERM or Ctrl-C"
    banner = f"worker for {args.app}: queues {served}, schema {client.schema!r}, {mode}"
    runtime: dict[str, Any] = {name: getattr(args, name) for name, _ in _TIMINGS}
    runtime = {k: v for k, v in runtime.items() if v is not None}
    asyncio.run(
        _run_worker(
            client,
            queues,
            banner,
            burst=args.burst,
            maintenance=args.maintenance,
            shutdown_timeout=args.shutdown_timeout,
            **runtime,
        )
    )
    return 0


async def _run_worker(
    client: AsyncClient, queues: dict[str, int] | None, banner: str, **runtime: Any
) -> None:
    async with client:
        await client.check_schema()  # says to run `wai migrate` when the schema is behind
        _err(banner, "")
        await client.run(queues, **runtime)


def _cmd_demo(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    from wai import demo  # only needed for `demo`

    url = _database_url(args, stack)
    return asyncio.run(demo.run(url, schema=args.schema or demo.SCHEMA))


# -- helpers ---------------------------------------------------------------------------


def _database_url(args: argparse.Namespace, stack: contextlib.ExitStack) -> str:
    """--database-url, WAI_DATABASE_URL, DATABASE_URL, else an embedded server."""
    url: str | None = (
        args.database_url or os.environ.get("WAI_DATABASE_URL") or os.environ.get("DATABASE_URL")
    )
    if url:
        _check_reachable(url)
        return url
    from wai import embedded  # only when no URL is configured

    _err("no database URL given (--database-url, WAI_DATABASE_URL or DATABASE_URL)", "")
    return stack.enter_context(embedded.embedded_database(announce=lambda m: _err(m, "")))


def _check_reachable(url: str) -> None:
    # Fail fast with the server's own message: the pool would retry for 30 s first.
    try:
        psycopg.connect(url, connect_timeout=10).close()
    except psycopg.Error as exc:
        raise DatabaseError(f"cannot connect to the database: {_first_line(exc)}") from None


def _parse_queues(specs: list[str]) -> dict[str, int] | None:
    queues: dict[str, int] = {}
    for spec in specs:
        name, sep, count = spec.partition("=")
        try:
            queues[name] = int(count) if sep else 10
        except ValueError:
            raise UsageError(
                f"--queue expects NAME or NAME=N with N an integer, got {spec!r}"
            ) from None
    return queues or None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text!r}")
    return value


def _subparser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],  # pyright: ignore[reportPrivateUsage]
    name: str,
    text: str,
    command: Command,
) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=text, description=text)
    _add_database_options(parser, default=argparse.SUPPRESS)
    parser.set_defaults(command=command)
    return parser


def _add_database_options(parser: argparse.ArgumentParser, *, default: Any) -> None:
    # Subcommands repeat these with SUPPRESS so `wai demo --database-url URL` works
    # too, without resetting a value given before the subcommand.
    parser.add_argument(
        "--database-url",
        metavar="URL",
        default=default,
        help="PostgreSQL URL (default: $WAI_DATABASE_URL, $DATABASE_URL, else embedded)",
    )
    parser.add_argument(
        "--schema",
        metavar="NAME",
        default=default,
        help="schema of wai's tables (default: wai; for demo: wai_demo; "
        "worker: must match APP's client)",
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _err(message: object, prefix: str = "error: ") -> None:
    print(f"wai: {prefix}{message}", file=sys.stderr, flush=True)


def _fail(message: object, *, status: int = 1) -> int:
    _err(message)
    return status
