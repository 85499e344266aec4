"""``wai migrate``: apply, check (``--check``) or print (``--sql``) the schema migrations.

With ``APP`` the database and schema are those of APP's client (see
:func:`wai.cli._app.load_runtime_app`); without, the configured database and
``--schema`` (default ``wai``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import TYPE_CHECKING

from wai import _migrate as migrate
from wai._translate import migrate_command
from wai.cli._app import AppNeedsDatabaseURL, load_runtime_app
from wai.cli._common import UsageError, database_url, err, subparser
from wai.client import Client

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands"]


def add_commands(sub: SubParsers) -> None:
    """Add ``migrate`` to ``wai``'s subcommands."""
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
    try:
        client, url = load_runtime_app(args, stack, offline=args.sql)
    except AppNeedsDatabaseURL as exc:  # --sql touches no database: start none for it
        raise UsageError(
            f"{exc}; --sql touches no database: set WAI_DATABASE_URL, or give --schema "
            "instead of APP"
        ) from None
    return url, client.schema
