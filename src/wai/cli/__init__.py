"""The ``wai`` command line: argparse, one small function per subcommand over the public API.

The database comes from ``--database-url``, else ``WAI_DATABASE_URL``, else
``DATABASE_URL``; with none, an embedded PostgreSQL is started (and announced on
stderr, see :mod:`wai._embedded`). A command taking ``APP`` imports it first and uses
its client's own URL and schema (see :func:`wai.cli._app.load_runtime_app`). Exit
codes: 0 success, 1 failure (a failed ``--check``, an unreachable database, a wai
error), 2 usage error (bad options, a bad ``APP``). Errors print ``wai: error: ...``
on stderr, without a traceback for wai's own errors and connection failures.

One module per command group, each adding its commands with ``add_commands``:
:mod:`~wai.cli.migrate`, :mod:`~wai.cli.worker` (``worker`` and ``maintenance``,
with ``--processes`` supervision), :mod:`~wai.cli.serve`, :mod:`~wai.cli.jobs`,
:mod:`~wai.cli.queues`, :mod:`~wai.cli.instances`, :mod:`~wai.cli.callbacks`,
:mod:`~wai.cli.completion`, :mod:`~wai.cli.dlq`, :mod:`~wai.cli.cron`, :mod:`~wai.cli.outbox`,
:mod:`~wai.cli.embedded` and :mod:`~wai.cli.demo`. :mod:`wai.cli._main` assembles
the parser and runs a command; :mod:`wai.cli._common` holds what they share
(database options, parser plumbing, errors, prompts), :mod:`wai.cli._app` loads
``APP`` and :mod:`wai.cli._tables` renders tables and ``--json``.
"""

from __future__ import annotations

from wai.cli._main import build_parser, main

__all__ = ["build_parser", "main"]
