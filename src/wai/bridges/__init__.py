"""Insert jobs through other database libraries, inside their caller's transaction.

One module per library, imported on its own so that only the library you use must be
installed: :mod:`wai.bridges.asyncpg` (``pip install 'wai[asyncpg]'``) and
:mod:`wai.bridges.sqlalchemy` (``pip install 'wai[sqlalchemy]'``). psycopg connections
take :mod:`wai.bridge` directly. Every bridge runs the statement ``client.insert`` runs,
so a bridged job is the same row, counted and traced the same way.
"""

from __future__ import annotations

__all__: list[str] = []
