"""Failing fast, and helpfully, when a client's database cannot be reached; noticing a
connection that went away while it sat idle."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from wai.errors import DatabaseError

__all__ = ["CONNECT_TIMEOUT", "keepalives", "unreachable"]

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


def keepalives(url: str) -> dict[str, Any]:
    """TCP keepalive settings for a connection that may sit idle for long (a pooled one,
    the worker's LISTEN), unless ``url`` sets any: probes after 10 s of silence, every
    5 s, 4 unanswered ones close it. The probes keep a firewall's or load balancer's idle
    timer from dropping the connection, and a server gone without a word is noticed within
    30 s rather than when a statement waits on it. A URL psycopg cannot read gets none (its
    connection attempt says what is wrong)."""
    try:
        given = conninfo_to_dict(url)
    except psycopg.Error:
        return {}
    if any(k.startswith("keepalives") for k in given):
        return {}
    return {
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 4,
    }
