"""``wai worker`` and ``wai maintenance``: run APP's workers, or only its leader services.

``wai worker --processes N`` runs N such workers as child processes under a
:class:`wai._supervisor.Supervisor` (see :func:`_supervise`). Both commands log
through :mod:`wai._logging` and accept the runtime's timings in seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import os
import socket
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from wai._logging import configure as configure_logging
from wai._supervisor import SLOT_ENV
from wai.cli._app import load_runtime_app
from wai.cli._common import UsageError, err, int_in, logging_options, subparser
from wai.cli.serve import listen_on
from wai.client import AsyncClient, Client
from wai.errors import SchemaNotMigrated
from wai.worker._heap import freeze_startup_heap

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands", "add_worker_options", "run_worker", "worker_option_argv"]

logger = logging.getLogger("wai.worker")

_TIMINGS = (
    ("poll_interval", "how often an idle queue is polled without a NOTIFY"),
    ("idle_poll_interval", "how far idle polls, promotion and cron back off while LISTEN works"),
    ("heartbeat_interval", "how often running jobs refresh their heartbeat"),
    ("heartbeat_staleness", "heartbeat age after which a job is rescued"),
    ("rescue_interval", "how often the leader looks for stale jobs"),
    ("promote_interval", "how often the leader promotes due scheduled/retryable jobs"),
    ("election_interval", "how often leadership is renewed or sought"),
    ("record_interval", "how often the process refreshes its runtime record"),
    ("cleanup_interval", "how often the leader deletes expired terminal jobs"),
    ("aging_interval", "how often the leader applies priority aging"),
    ("analyze_interval", "how often the leader checks whether the jobs table needs ANALYZE"),
    ("reindex_interval", "how often the leader checks the jobs table's indexes for bloat"),
    ("depth_interval", "how often the leader samples queue depths for the dashboard"),
    ("throughput_interval", "how often the process writes its per-minute outcome counts"),
    ("completed_retention", "how long completed jobs are kept (default 1 day)"),
    ("failed_retention", "how long failed jobs are kept (default 7 days)"),
    ("cancelled_retention", "how long cancelled jobs are kept (default 7 days)"),
)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text!r}")
    return value


_processes = int_in(1, 256, "a whole number")
_port = int_in(0, 65535, "a port number")


def _metrics_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics-port",
        type=_port,
        metavar="N",
        help="serve /metrics (Prometheus), /healthz and /readyz on port N (needs "
        "wai[metrics]); with --processes, process i (from 0) serves on N+i",
    )
    p.add_argument(
        "--metrics-host",
        default="0.0.0.0",  # noqa: S104 - probes and scrapes come from other hosts
        metavar="HOST",
        help="address the metrics port binds (default 0.0.0.0: every interface)",
    )


def add_worker_options(p: argparse.ArgumentParser) -> None:
    """Every option of ``wai worker`` but APP (``manage.py wai_worker`` takes them too)."""
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
        help="seconds running jobs get to finish on SIGTERM/SIGINT (default 10); "
        "a second Ctrl-C stops at once, recording them as retryable",
    )
    p.add_argument(
        "--processes",
        type=_processes,
        metavar="N",
        help="run N worker processes under a supervisor that restarts any that dies "
        "(one process uses about one core)",
    )
    p.add_argument(
        "--dlq",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="--dlq: jobs of the served queues that fail for good (no attempt left, or a "
        "terminal error) move to the dead-letter queue; --no-dlq: they stay 'failed' in "
        "the jobs table. Stored per queue when the worker starts, so every process "
        "applies it; a queue whose QueueConfig in APP sets dlq keeps its own. "
        "Default: leave the stored setting as it is",
    )
    _metrics_options(p)
    logging_options(p)
    for name, text in _TIMINGS:
        flag = "--" + name.replace("_", "-")
        p.add_argument(flag, dest=name, type=_seconds, metavar="S", help=f"seconds: {text}")


def add_commands(sub: SubParsers) -> None:
    """Add ``worker`` and ``maintenance`` to ``wai``'s subcommands."""
    p = subparser(sub, "worker", "run workers (and maintenance) for APP", _cmd_worker)
    p.add_argument("app", metavar="APP", help="module:attribute naming a wai.AsyncClient")
    add_worker_options(p)

    p = subparser(
        sub,
        "maintenance",
        "run only the leader-elected maintenance for APP (claims no job)",
        _cmd_maintenance,
    )
    p.add_argument("app", metavar="APP", help="module:attribute naming a wai.AsyncClient")
    p.add_argument(
        "--shutdown-timeout",
        type=_seconds,
        default=10.0,
        metavar="S",
        help="seconds to stop on SIGTERM/SIGINT (default 10)",
    )
    _metrics_options(p)
    logging_options(p)
    for name, text in _TIMINGS:
        if name != "poll_interval":  # nothing is claimed, so nothing is polled
            flag = "--" + name.replace("_", "-")
            p.add_argument(flag, dest=name, type=_seconds, metavar="S", help=f"seconds: {text}")


def _cmd_worker(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    return run_worker(args, stack)


def run_worker(
    args: argparse.Namespace,
    stack: contextlib.ExitStack,
    *,
    child_argv: Callable[[argparse.Namespace], list[str]] | None = None,
    migrate_hint: str | None = None,
) -> int:
    """``wai worker`` on parsed ``args``: APP, ``--database-url``, ``--schema`` and the
    options of :func:`add_worker_options`.

    ``child_argv`` gives the command line of each child of ``--processes`` (default:
    ``python -m wai worker APP`` with the same options); ``migrate_hint`` says where
    to run the migrations when the schema is behind (default: which database
    ``wai migrate`` must be given).
    """
    queues = _parse_queues(args.queue)
    configure_logging(args.log_level, args.log_format)  # before APP's import logs anything
    source = _url_source(args)
    client, url = load_runtime_app(args, stack)
    with _migrate_advice(client, url, source, migrate_hint):
        if args.processes is not None:
            return _supervise(args, client, url, (child_argv or _worker_argv)(args))
        served = ", ".join(queues or client.registry.queues()) or "(none)"
        mode = "until the queues are empty" if args.burst else "until SIGTERM or Ctrl-C"
        banner = f"worker for {args.app}: queues {served}, schema {client.schema!r}, {mode}"
        probes = _probe_socket(args, stack)
        asyncio.run(
            _run_worker(
                client,
                queues,
                banner,
                probes,
                burst=args.burst,
                maintenance=args.maintenance,
                **_runtime_options(args),
            )
        )
    return 0


def _cmd_maintenance(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    configure_logging(args.log_level, args.log_format)
    source = _url_source(args)
    client, url = load_runtime_app(args, stack)
    banner = (
        f"maintenance for {args.app}: leader election, promotion, rescue, cleanup, aging; "
        f"no queues served; schema {client.schema!r}, until SIGTERM or Ctrl-C"
    )
    probes = _probe_socket(args, stack)
    with _migrate_advice(client, url, source):
        asyncio.run(
            _run_worker(client, {}, banner, probes, maintenance=True, **_runtime_options(args))
        )
    return 0


def _probe_socket(args: argparse.Namespace, stack: contextlib.ExitStack) -> socket.socket | None:
    """The listening socket of ``--metrics-port`` (None without it); the port of a child
    of ``--processes`` is offset by its slot. Fails before anything starts when the
    extra is missing or the port is taken."""
    if args.metrics_port is None:
        return None
    try:
        importlib.import_module("wai.web._probes")  # the extra's presence, checked now
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    port = args.metrics_port
    if port:
        port += int(os.environ.get(SLOT_ENV, "0") or 0)
    sock = stack.enter_context(listen_on(args.metrics_host, port, flag="--metrics-port"))
    got = sock.getsockname()[1]
    err(f"metrics and probes on http://{args.metrics_host}:{got}/metrics, /healthz, /readyz", "")
    return sock


def _url_source(args: argparse.Namespace) -> str:
    """Where the database URL comes from (read before APP's client is handed it)."""
    if args.database_url:
        return "--database-url"
    for name in ("WAI_DATABASE_URL", "DATABASE_URL"):
        if os.environ.get(name):
            return name
    return "embedded"


@contextlib.contextmanager
def _migrate_advice(
    client: AsyncClient, url: str, source: str, hint: str | None = None
) -> Iterator[None]:
    """Add to "run `wai migrate`" which database ``wai migrate`` must be given (or ``hint``)."""
    try:
        yield
    except SchemaNotMigrated as exc:
        if hint is not None:
            where = hint
        elif client.database_url != url:
            where = "APP's client names its own database: give that URL to --database-url"
        elif source == "--database-url":
            where = "with the same --database-url"
        elif source == "embedded":
            where = "on the embedded database: run it with no database URL too"
        else:
            where = f"with the database of ${source}, which `wai migrate` reads too"
        raise SchemaNotMigrated(f"{exc} ({where})") from None


def _runtime_options(args: argparse.Namespace) -> dict[str, Any]:
    """``shutdown_timeout``, the timings and ``dlq`` given on the command line."""
    runtime: dict[str, Any] = {
        name: getattr(args, name) for name, _ in _TIMINGS if getattr(args, name, None) is not None
    }
    if getattr(args, "dlq", None) is not None:
        runtime["dlq"] = args.dlq
    return {"shutdown_timeout": args.shutdown_timeout, **runtime}


def _supervise(args: argparse.Namespace, client: AsyncClient, url: str, argv: list[str]) -> int:
    """`wai worker --processes N`: N child workers under a :class:`wai._supervisor.Supervisor`."""
    from wai._supervisor import Supervisor

    with Client(client.database_url, schema=client.schema, max_connections=1) as check:
        check.check_schema()  # fail once here rather than in every child, again and again
    err(
        f"supervising {args.processes} worker processes for {args.app}, "
        f"schema {client.schema!r}, until SIGTERM or Ctrl-C",
        "",
    )
    supervisor = Supervisor(argv, args.processes, env={**os.environ, "WAI_DATABASE_URL": url})
    return asyncio.run(supervisor.run())


def _worker_argv(args: argparse.Namespace) -> list[str]:
    """The command line of one child of `wai worker --processes N`: the same options.

    The database URL travels in ``WAI_DATABASE_URL``, not in the arguments that
    ``ps`` shows.
    """
    argv = [sys.executable, "-m", "wai"]
    if args.schema:
        argv += ["--schema", args.schema]
    return [*argv, "worker", args.app, *worker_option_argv(args)]


def worker_option_argv(args: argparse.Namespace) -> list[str]:
    """The options of ``args`` (:func:`add_worker_options`) as a command line, but
    ``--processes``: what each child of ``--processes N`` is given."""
    argv: list[str] = []
    for spec in args.queue:
        argv += ["--queue", spec]
    if args.burst:
        argv.append("--burst")
    if not args.maintenance:
        argv.append("--no-maintenance")
    if args.metrics_port is not None:
        argv += ["--metrics-port", str(args.metrics_port), "--metrics-host", args.metrics_host]
    argv += ["--log-level", args.log_level, "--log-format", args.log_format]
    for name, value in _runtime_options(args).items():
        if name == "dlq":
            argv.append("--dlq" if value else "--no-dlq")
        else:
            argv += ["--" + name.replace("_", "-"), repr(value)]
    return argv


async def _run_worker(
    client: AsyncClient,
    queues: dict[str, int] | None,
    banner: str,
    probes: socket.socket | None,
    **runtime: Any,
) -> None:
    async with client:
        await client.check_schema()  # says to run `wai migrate` when the schema is behind
        err(banner, "")
        # This process is the worker's: its imports and connections stay for good.
        frozen = freeze_startup_heap()
        logger.debug("froze %d objects of the startup heap (gc.freeze)", frozen)
        if probes is None:
            await client.run(queues, **runtime)
            return
        from wai.web._probes import ProbeServer

        server = ProbeServer(client, probes)
        server.start()
        try:
            await client.run(queues, **runtime)
        finally:
            await server.stop()


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
