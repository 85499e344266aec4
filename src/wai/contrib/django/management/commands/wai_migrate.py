"""``manage.py wai_migrate``: apply, check (``--check``) or print (``--sql``) wai's migrations.

The database is that of ``settings.WAI["DATABASE"]``, the schema
``settings.WAI["SCHEMA"]``. wai's tables live in that schema and are not Django
models: ``manage.py migrate`` never touches them, this command does.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from wai import _migrate as migrate
from wai.cli._common import check_reachable, err
from wai.cli._main import run_command
from wai.client import Client
from wai.contrib.django._conf import database_url, wai_settings

__all__ = ["Command"]


class Command(BaseCommand):
    """Apply wai's pending migrations to the Django database of ``settings.WAI``."""

    help = (
        "Apply wai's pending schema migrations to the database of settings.WAI['DATABASE'] "
        "(schema settings.WAI['SCHEMA']); wai's tables are not Django models."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        """``--check`` or ``--sql``."""
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument(
            "--check", action="store_true", help="exit 1 listing pending migrations; apply nothing"
        )
        mode.add_argument(
            "--sql", action="store_true", help="print every migration as SQL; touch no database"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        """Migrate, check or print; exits 1 when ``--check`` finds pending migrations."""
        status = run_command(_migrate, argparse.Namespace(**options))
        if status:
            sys.exit(status)


def _migrate(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    conf = wai_settings()
    if args.sql:
        sys.stdout.write(migrate.script(conf.schema))
        return 0
    url = database_url()
    check_reachable(url)
    target = f"schema {conf.schema!r} of database {conf.database!r}"
    with Client(url, schema=conf.schema, max_connections=1) as client:
        if args.check:
            pending = client.pending_migrations()
            if pending:
                versions = ", ".join(str(v) for v in pending)
                err(
                    f"{target} has pending migrations: {versions}; run python manage.py wai_migrate"
                )
                return 1
            print(f"{target} is up to date")
            return 0
        applied = client.migrate()
    if applied:
        print(f"{target}: applied migrations {', '.join(str(v) for v in applied)}")
    else:
        print(f"{target} is already up to date")
    return 0
