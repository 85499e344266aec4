"""The ``wai`` command line: argparse, one small function per subcommand over the public API.

The database comes from ``--database-url``, else ``WAI_DATABASE_URL``, else
``DATABASE_URL``; with none, an embedded PostgreSQL is started (and announced on
stderr, see :mod:`wai.embedded`). A command taking ``APP`` imports it first and uses
its client's own URL and schema (see :func:`_load_runtime_app`). Exit codes: 0
success, 1 failure (a failed ``--check``, an unreachable database, a wai error), 2
usage error (bad options, a bad ``APP``). Errors print ``wai: error: ...`` on stderr,
without a traceback for wai's own errors and connection failures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from wai import _tables, cli_cron, cli_dlq, cli_embedded, cli_outbox, migrate
from wai._cli_common import (
    Command,
    UsageError,
    add_database_options,
    admin_client,
    check_reachable,
    confirm,
    database_url,
    embedded_database_url,
    err,
    fail,
    first_line,
    group,
    int_in,
    json_option,
    limit,
    logging_options,
    subparser,
    yes_option,
)
from wai._logging import configure as configure_logging
from wai._translate import migrate_command
from wai._version import __version__
from wai.client import AsyncClient, Client
from wai.errors import SchemaNotMigrated, ValidationError, WaiError
from wai.inserts import validate_queue
from wai.instances import registry_drift
from wai.job import JobState

if TYPE_CHECKING:
    from wai._cli_common import SubParsers

__all__ = ["build_parser", "main"]

_TIMINGS = (
    ("poll_interval", "how often an idle queue is polled without a NOTIFY"),
    ("heartbeat_interval", "how often running jobs refresh their heartbeat"),
    ("heartbeat_staleness", "heartbeat age after which a job is rescued"),
    ("rescue_interval", "how often the leader looks for stale jobs"),
    ("promote_interval", "how often the leader promotes due scheduled/retryable jobs"),
    ("election_interval", "how often leadership is renewed or sought"),
    ("record_interval", "how often the process refreshes its runtime record"),
    ("cleanup_interval", "how often the leader deletes expired terminal jobs"),
    ("aging_interval", "how often the leader applies priority aging"),
    ("analyze_interval", "how often the leader checks whether the jobs table needs ANALYZE"),
    ("completed_retention", "how long completed jobs are kept (default 1 day)"),
    ("failed_retention", "how long failed jobs are kept (default 7 days)"),
    ("cancelled_retention", "how long cancelled jobs are kept (default 7 days)"),
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``wai`` command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    command: Command = args.command
    try:
        with contextlib.ExitStack() as stack:
            return command(args, stack)
    except (UsageError, ValidationError) as exc:
        return fail(exc, status=2)
    except WaiError as exc:
        return fail(exc)
    except psycopg.OperationalError as exc:
        return fail(f"lost the database connection: {first_line(exc)}")
    except KeyboardInterrupt:
        _leave_handler_threads()
        return 130
    except BrokenPipeError:
        # The reader went away (`wai jobs list | head -1`). The stack has unwound (an
        # embedded server is stopped, whatever printing does); point stdout at
        # /dev/null so the final flush cannot fail again, as the Python docs advise.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``wai`` and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="wai", description="wai: a PostgreSQL-native background job queue."
    )
    parser.add_argument("--version", action="version", version=f"wai {__version__}")
    add_database_options(parser, default=None)
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

    p = subparser(sub, "migrate", "apply pending schema migrations", _cmd_migrate)
    p.add_argument(
        "app",
        metavar="APP",
        nargs="?",
        help="module:attribute naming a wai.AsyncClient: migrate its database and schema",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--check", action="store_true", help="exit 1 listing pending migrations; apply nothing"
    )
    mode.add_argument(
        "--sql", action="store_true", help="print every migration as SQL; touch no database"
    )

    p = subparser(sub, "worker", "run workers (and maintenance) for APP", _cmd_worker)
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
    logging_options(p)
    for name, text in _TIMINGS:
        flag = "--" + name.replace("_", "-")
        p.add_argument(flag, dest=name, type=_seconds, metavar="S", help=f"seconds: {text}")

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
    logging_options(p)
    for name, text in _TIMINGS:
        if name != "poll_interval":  # nothing is claimed, so nothing is polled
            flag = "--" + name.replace("_", "-")
            p.add_argument(flag, dest=name, type=_seconds, metavar="S", help=f"seconds: {text}")

    _add_operator_commands(sub)
    _add_instance_commands(sub)
    _add_callback_commands(sub)
    _add_completion_command(sub)
    cli_dlq.add_commands(sub)
    cli_cron.add_commands(sub)
    cli_outbox.add_commands(sub)
    cli_embedded.add_commands(sub)
    subparser(sub, "demo", "a signup flow showing follow-ups committed with outcomes", _cmd_demo)
    return parser


# -- subcommands -----------------------------------------------------------------------


def _cmd_migrate(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    url, schema = _migrate_target(args, stack) if args.app else (None, args.schema or "wai")
    if args.sql:
        sys.stdout.write(migrate.script(schema))
        return 0
    url = url or database_url(args, stack)
    with Client(url, schema=schema, max_connections=1) as client:
        if args.check:
            pending = client.pending_migrations()
            if pending:
                versions = ", ".join(str(v) for v in pending)
                err(
                    f"schema {schema!r} has pending migrations: {versions}; "
                    f"run {migrate_command(schema)}"
                )
                return 1
            print(f"schema {schema!r} is up to date")
            return 0
        applied = client.migrate()
    if applied:
        print(f"schema {schema!r}: applied migrations {', '.join(str(v) for v in applied)}")
    else:
        print(f"schema {schema!r} is already up to date")
    return 0


def _migrate_target(args: argparse.Namespace, stack: contextlib.ExitStack) -> tuple[str, str]:
    """`wai migrate APP`: the database URL and schema of APP's client (URL unchecked for --sql)."""
    from wai._app import AppNeedsDatabaseURL

    try:
        client, url = _load_runtime_app(args, stack, offline=args.sql)
    except AppNeedsDatabaseURL as exc:  # --sql touches no database: start none for it
        raise UsageError(
            f"{exc}; --sql touches no database: set WAI_DATABASE_URL, or give --schema "
            "instead of APP"
        ) from None
    return url, client.schema


def _cmd_worker(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    queues = _parse_queues(args.queue)
    configure_logging(args.log_level, args.log_format)  # before APP's import logs anything
    source = _url_source(args)
    client, url = _load_runtime_app(args, stack)
    with _migrate_advice(client, url, source):
        if args.processes is not None:
            return _supervise(args, client, url)
        served = ", ".join(queues or client.registry.queues()) or "(none)"
        mode = "until the queues are empty" if args.burst else "until SIGTERM or Ctrl-C"
        banner = f"worker for {args.app}: queues {served}, schema {client.schema!r}, {mode}"
        asyncio.run(
            _run_worker(
                client,
                queues,
                banner,
                burst=args.burst,
                maintenance=args.maintenance,
                **_runtime_options(args),
            )
        )
    return 0


def _cmd_maintenance(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    configure_logging(args.log_level, args.log_format)
    source = _url_source(args)
    client, url = _load_runtime_app(args, stack)
    banner = (
        f"maintenance for {args.app}: leader election, promotion, rescue, cleanup, aging; "
        f"no queues served; schema {client.schema!r}, until SIGTERM or Ctrl-C"
    )
    with _migrate_advice(client, url, source):
        asyncio.run(_run_worker(client, {}, banner, maintenance=True, **_runtime_options(args)))
    return 0


def _url_source(args: argparse.Namespace) -> str:
    """Where the database URL comes from (read before APP's client is handed it)."""
    if args.database_url:
        return "--database-url"
    for name in ("WAI_DATABASE_URL", "DATABASE_URL"):
        if os.environ.get(name):
            return name
    return "embedded"


@contextlib.contextmanager
def _migrate_advice(client: AsyncClient, url: str, source: str) -> Iterator[None]:
    """Add to "run `wai migrate`" which database ``wai migrate`` must be given."""
    try:
        yield
    except SchemaNotMigrated as exc:
        if client.database_url != url:
            where = "APP's client names its own database: give that URL to --database-url"
        elif source == "--database-url":
            where = "with the same --database-url"
        elif source == "embedded":
            where = "on the embedded database: run it with no database URL too"
        else:
            where = f"with the database of ${source}, which `wai migrate` reads too"
        raise SchemaNotMigrated(f"{exc} ({where})") from None


def _load_runtime_app(
    args: argparse.Namespace, stack: contextlib.ExitStack, *, offline: bool = False
) -> tuple[AsyncClient, str]:
    """Import APP's client for a command taking APP; returns it and its database URL.

    APP is imported first, with ``WAI_DATABASE_URL`` set to ``--database-url`` when
    one is given (else the environment as it is). The client's own URL and schema
    win: a ``--database-url`` or ``--schema`` that disagrees is a usage error. Only
    when APP builds a client without a URL and none is configured is the embedded
    server started and APP imported again on it. ``offline`` (``migrate --sql``)
    starts nothing and connects nowhere: :class:`wai._app.AppNeedsDatabaseURL` then
    propagates.
    """
    from wai._app import AppNeedsDatabaseURL, parse_app  # imports user code: only for APP

    parse_app(args.app)  # a malformed APP fails before anything is imported or started
    if args.database_url:
        # A client built at import without a URL reads WAI_DATABASE_URL: give it ours.
        os.environ["WAI_DATABASE_URL"] = args.database_url
    embedded_url: str | None = None
    try:
        client = _import_app(args.app)
    except AppNeedsDatabaseURL:
        if offline:
            raise
        embedded_url = os.environ["WAI_DATABASE_URL"] = embedded_database_url(stack)
        client = _import_app(args.app)
    if args.database_url and client.database_url != args.database_url:
        raise UsageError(f"{args.app} uses its own database URL, not the --database-url given")
    if args.schema and client.schema != args.schema:
        raise UsageError(f"{args.app} uses schema {client.schema!r}, not --schema {args.schema!r}")
    if not offline and client.database_url != embedded_url:  # embedded: checked at start
        check_reachable(client.database_url)
    return client, client.database_url


def _import_app(app: str) -> AsyncClient:
    """:func:`wai._app.load_app`, an error of the module's own code shown with its traceback."""
    from wai._app import load_app

    try:
        return load_app(app)
    except WaiError:
        raise
    except Exception:
        traceback.print_exc()
        raise WaiError(f"importing APP {app!r} failed (traceback above)") from None


def _runtime_options(args: argparse.Namespace) -> dict[str, Any]:
    """``shutdown_timeout``, the timings and ``dlq`` given on the command line."""
    runtime: dict[str, Any] = {
        name: getattr(args, name) for name, _ in _TIMINGS if getattr(args, name, None) is not None
    }
    if getattr(args, "dlq", None) is not None:
        runtime["dlq"] = args.dlq
    return {"shutdown_timeout": args.shutdown_timeout, **runtime}


def _supervise(args: argparse.Namespace, client: AsyncClient, url: str) -> int:
    """`wai worker --processes N`: N child workers under a :class:`wai.supervisor.Supervisor`."""
    from wai.supervisor import Supervisor

    with Client(client.database_url, schema=client.schema, max_connections=1) as check:
        check.check_schema()  # fail once here rather than in every child, again and again
    err(
        f"supervising {args.processes} worker processes for {args.app}, "
        f"schema {client.schema!r}, until SIGTERM or Ctrl-C",
        "",
    )
    supervisor = Supervisor(
        _worker_argv(args), args.processes, env={**os.environ, "WAI_DATABASE_URL": url}
    )
    return asyncio.run(supervisor.run())


def _worker_argv(args: argparse.Namespace) -> list[str]:
    """The command line of one child of `wai worker --processes N`: the same options.

    The database URL travels in ``WAI_DATABASE_URL``, not in the arguments that
    ``ps`` shows.
    """
    argv = [sys.executable, "-m", "wai"]
    if args.schema:
        argv += ["--schema", args.schema]
    argv += ["worker", args.app]
    for spec in args.queue:
        argv += ["--queue", spec]
    if args.burst:
        argv.append("--burst")
    if not args.maintenance:
        argv.append("--no-maintenance")
    argv += ["--log-level", args.log_level, "--log-format", args.log_format]
    for name, value in _runtime_options(args).items():
        if name == "dlq":
            argv.append("--dlq" if value else "--no-dlq")
        else:
            argv += ["--" + name.replace("_", "-"), repr(value)]
    return argv


async def _run_worker(
    client: AsyncClient, queues: dict[str, int] | None, banner: str, **runtime: Any
) -> None:
    async with client:
        await client.check_schema()  # says to run `wai migrate` when the schema is behind
        err(banner, "")
        await client.run(queues, **runtime)


def _cmd_demo(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    from wai import demo  # only needed for `demo`

    url = database_url(args, stack)
    # A closed stdout (`wai demo | head`) raises BrokenPipeError out of here once the
    # demo has stopped its workers; main() handles it like for every command.
    return asyncio.run(demo.run(url, schema=args.schema or demo.SCHEMA))


# -- operator actions: jobs and queues ----------------------------------------------------


def _add_operator_commands(sub: SubParsers) -> None:
    jobs = group(sub, "jobs", "list, show, retry and cancel jobs")
    p = subparser(jobs, "list", "list jobs, newest first", _cmd_jobs_list)
    p.add_argument("--state", choices=[s.value for s in JobState], help="only jobs in STATE")
    p.add_argument("--kind", metavar="KIND", help="only jobs of this kind")
    p.add_argument("--queue", metavar="QUEUE", help="only jobs of this queue")
    p.add_argument("--tag", metavar="TAG", help="only jobs carrying this tag")
    p.add_argument(
        "--limit", type=limit, default=100, metavar="N", help="at most N jobs (default 100)"
    )
    p.add_argument(
        "--before-id", type=int, metavar="ID", help="only jobs older than ID (the next page)"
    )
    json_option(p)
    p = subparser(jobs, "show", "every field of one job, its errors and progress", _cmd_jobs_show)
    p.add_argument("id", type=int, metavar="ID", help="the job id")
    json_option(p)
    p = subparser(jobs, "retry", "run a failed or cancelled job again now", _cmd_jobs_retry)
    p.add_argument("id", type=int, metavar="ID", help="the job id")
    json_option(p)
    p = subparser(jobs, "cancel", "cancel a job that has not finished", _cmd_jobs_cancel)
    p.add_argument("id", type=int, metavar="ID", help="the job id")
    json_option(p)

    queues = group(sub, "queues", "list, pause, resume and drain queues")
    p = subparser(queues, "list", "counts by state, pause flag and lag per queue", _cmd_queues)
    json_option(p)
    for name, text in (
        ("pause", "stop workers claiming from queue NAME (inserts still land)"),
        ("resume", "let workers claim from queue NAME again"),
        ("drain", "cancel every job of queue NAME that waits to run (not running ones)"),
    ):
        p = subparser(queues, name, text, _cmd_queue_action)
        p.add_argument("name", metavar="NAME", help="the queue")
        p.set_defaults(action=name)
        if name == "drain":
            yes_option(p)


def _add_instance_commands(sub: SubParsers) -> None:
    instances = group(sub, "instances", "live worker and maintenance processes")
    p = subparser(
        instances,
        "list",
        "live processes: role, queues, leader, health, follow-up specs, registry drift",
        _cmd_instances,
    )
    json_option(p)


def _add_callback_commands(sub: SubParsers) -> None:
    callbacks = group(sub, "callbacks", "the public HTTP ingress of external callbacks")
    p = subparser(
        callbacks,
        "serve",
        "serve signed POST /callbacks/{id}/{action} requests with APP's client",
        _cmd_callbacks_serve,
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


def _add_completion_command(sub: SubParsers) -> None:
    p = subparser(
        sub,
        "completion",
        "print a completion script for SHELL (e.g. `wai completion bash > "
        "~/.local/share/bash-completion/completions/wai`)",
        _cmd_completion,
    )
    p.add_argument("shell", metavar="SHELL", choices=_SHELLS, help=", ".join(_SHELLS))


_SHELLS = ("bash", "zsh", "tcsh")


def _cmd_completion(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    try:
        import shtab  # only needed here
    except ImportError:
        raise WaiError("shell completion needs the shtab package: pip install shtab") from None
    sys.stdout.write(shtab.complete(build_parser(), shell=args.shell))
    return 0


def _cmd_callbacks_serve(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
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
    client, _url = _load_runtime_app(args, stack)
    announce = functools.partial(err, prefix="")
    asyncio.run(serve(client, secret=secret, host=args.host, port=args.port, announce=announce))
    return 0


def _cmd_instances(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    instances = admin_client(args, stack).list_runtime_instances()
    drift = registry_drift(instances)
    if args.json:
        print(
            _tables.json_text(
                {
                    "instances": instances,
                    "drift": [
                        {"kind": k, "outcome": o, "specs_by_instance": views}
                        for (k, o), views in drift.items()
                    ],
                }
            )
        )
        return 0
    print(_tables.instances_table(instances))
    for (kind, outcome), views in drift.items():
        err(f"registry drift on {kind} → {outcome}:", "")
        for instance, names in views.items():
            err(f"  {instance}: {', '.join(names) or '(no spec)'}", "")
    return 0


def _cmd_jobs_list(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    client = admin_client(args, stack)
    rows = client.list_jobs(
        state=args.state,
        kind=args.kind,
        queue=args.queue,
        tag=args.tag,
        limit=args.limit,
        before_id=args.before_id,
    )
    if args.json:
        print(_tables.json_text(rows))
        return 0
    print(_tables.jobs_table(rows))
    if len(rows) == args.limit:
        err(f"more jobs may follow: add --before-id {rows[-1].id}", "")
    return 0


def _cmd_jobs_show(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    row = admin_client(args, stack).get_job(args.id)
    print(_tables.json_text(row) if args.json else _tables.job_detail(row))
    return 0


def _cmd_jobs_retry(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    row = admin_client(args, stack).retry(args.id)
    if args.json:
        print(_tables.json_text(row))
    else:
        print(
            f"job {row.id} retried: available now on queue {row.queue!r}, "
            f"attempt {row.attempt + 1} of {row.max_attempts} next"
        )
    return 0


def _cmd_jobs_cancel(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    row = admin_client(args, stack).cancel(args.id)
    print(_tables.json_text(row) if args.json else f"job {row.id} cancelled")
    return 0


def _cmd_queues(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    client = admin_client(args, stack)
    stats = client.queue_stats()
    if args.json:
        print(_tables.json_text(stats))
        return 0
    print(_tables.queues_table(stats))
    outbox = client.outbox_stats()
    if outbox.pending or outbox.failed:
        print(f"\n{cli_outbox.stats_line(outbox)} (see wai outbox list)")
    return 0


def _cmd_queue_action(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    client = admin_client(args, stack)
    name: str = args.name
    if args.action == "pause":
        client.pause_queue(name)
        print(f"queue {name!r} paused: workers claim nothing from it until it is resumed")
    elif args.action == "resume":
        client.resume_queue(name)
        print(f"queue {name!r} resumed")
    else:
        validate_queue(name)  # a bad name is refused before anyone is asked
        if not confirm(
            f"drain queue {name!r} (cancel every job of it that waits to run)", yes=args.yes
        ):
            err("aborted: nothing cancelled", "")
            return 1
        drained = client.drain_queue(name)
        print(f"queue {name!r} drained: {drained} job{'' if drained == 1 else 's'} cancelled")
    return 0


# -- helpers ---------------------------------------------------------------------------


def _leave_handler_threads() -> None:
    """Exit now if a plain ``def`` handler still runs after a second Ctrl-C.

    Its attempt is already recorded as retryable; Python would otherwise wait for its
    thread at exit, and the process would not stop at once.
    """
    lingering = [t for t in threading.enumerate() if t.name.startswith("wai-job")]
    for thread in lingering:
        thread.join(timeout=0.1)
    if any(t.is_alive() for t in lingering):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)


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


_port = int_in(0, 65535, "a port number")
_processes = int_in(1, 256, "a whole number")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text!r}")
    return value
