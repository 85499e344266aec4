"""Failing fast, and helpfully, when a client's database cannot be reached."""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict

from wai.errors import DatabaseError

__all__ = ["CONNECT_TIMEOUT", "unreachable"]

#: Seconds a client waits for its first connection before it reports the database down.
CONNECT_TIMEOUT = 5


def _where(url: str) -> str:
    """``database "app" on localhost:5432``, read from ``url`` (never its password)."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        return "the database"
    host = params.get("host") or "the default host"
    port = params.get("port") or "5432"
    name = params.get("dbname") or params.get("user") or "(default)"
    return f'database "{name}" on {host}:{port}'


def unreachable(url: str, exc: BaseException) -> DatabaseError:
    """The error a client raises when its first connection fails: what, and what to do."""
    text = str(exc).strip()
    reason = text.splitlines()[-1] if text else type(exc).__name__
    return DatabaseError(
        f"cannot connect to the {_where(url)}: {reason}. Check the URL (the client's "
        "database_url, else WAI_DATABASE_URL or DATABASE_URL), that the server runs and "
        'accepts connections, and that the database exists (createdb NAME, or "wai demo" '
        "for a throwaway embedded PostgreSQL)"
    )
