"""The ``wai`` parser, assembled from the command modules, and :func:`main` running it."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from collections.abc import Sequence

import psycopg

from wai._version import __version__
from wai.cli import (
    callbacks,
    completion,
    cron,
    demo,
    dlq,
    embedded,
    instances,
    jobs,
    migrate,
    outbox,
    queues,
    serve,
    worker,
)
from wai.cli._common import Command, UsageError, add_database_options, fail, first_line
from wai.errors import ValidationError, WaiError

__all__ = ["build_parser", "main", "run_command"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``wai`` command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    return run_command(args.command, args)


def run_command(command: Command, args: argparse.Namespace) -> int:
    """Run one parsed command as ``wai`` does: its errors reported, an exit status returned.

    A usage or validation error exits 2, any other wai error 1, Ctrl-C 130.
    """
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
        return 130  # 128 + SIGINT, as a shell reports Ctrl-C
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
    # The order of `wai --help`.
    migrate.add_commands(sub)
    worker.add_commands(sub)
    serve.add_commands(sub)
    jobs.add_commands(sub)
    queues.add_commands(sub)
    instances.add_commands(sub)
    callbacks.add_commands(sub)
    completion.add_commands(sub)
    dlq.add_commands(sub)
    cron.add_commands(sub)
    outbox.add_commands(sub)
    embedded.add_commands(sub)
    demo.add_commands(sub)
    return parser


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
