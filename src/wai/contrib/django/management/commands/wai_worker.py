"""``manage.py wai_worker``: ``wai worker`` for ``settings.WAI["APP"]`` on the Django database.

The options are those of ``wai worker`` (:func:`wai.cli.worker.add_worker_options`);
the database is the libpq conninfo of ``settings.WAI["DATABASE"]``
(:func:`wai.contrib.django.database_url`) and the schema ``settings.WAI["SCHEMA"]``.
The children of ``--processes N`` are ``python -m django wai_worker`` too, so
handlers run with Django set up.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from wai.cli._main import run_command
from wai.cli.worker import add_worker_options, run_worker, worker_option_argv
from wai.contrib.django._conf import database_url, wai_settings
from wai.errors import ValidationError

__all__ = ["Command"]

_MIGRATE_HINT = "in this Django project: python manage.py wai_migrate"


class Command(BaseCommand):
    """Run wai's workers (and maintenance) for ``settings.WAI["APP"]``."""

    help = (
        "Run wai's workers (and maintenance) for APP (default settings.WAI['APP']) on the "
        "database of settings.WAI['DATABASE']; the options of `wai worker`."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """APP (optional) and every option of ``wai worker``."""
        parser.add_argument(
            "app",
            metavar="APP",
            nargs="?",
            help="module:attribute naming a wai.AsyncClient (default: settings.WAI['APP'])",
        )
        add_worker_options(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the worker; exits with ``wai worker``'s status when it fails."""
        status = run_command(_worker, argparse.Namespace(**options))
        if status:
            sys.exit(status)


def _worker(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    conf = wai_settings()
    args.app = args.app or conf.app
    if not args.app:
        raise ValidationError(
            "no APP to run: set settings.WAI['APP'] to 'module:attribute' naming your "
            "wai.AsyncClient (e.g. 'myproject.tasks:client'), or give APP"
        )
    args.database_url = database_url()
    args.schema = conf.schema
    return run_worker(args, stack, child_argv=_child_argv, migrate_hint=_MIGRATE_HINT)


def _child_argv(args: argparse.Namespace) -> list[str]:
    """``python -m django wai_worker APP ...``: a child of ``--processes N``, with Django
    set up from the same settings module and path as this process."""
    argv = [sys.executable, "-m", "django", "wai_worker", args.app]
    if args.settings:
        argv += ["--settings", args.settings]
    pythonpath = args.pythonpath or (os.path.abspath(sys.path[0]) if sys.path[0] else os.getcwd())
    argv += ["--pythonpath", pythonpath]
    return argv + worker_option_argv(args)
