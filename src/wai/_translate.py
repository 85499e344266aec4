"""Turns PostgreSQL errors into wai errors that say what to do."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pgerr

from wai.errors import (
    DatabaseError,
    SchemaNotMigrated,
    UniqueConflict,
    ValidationError,
    WaiError,
)

__all__ = ["from_sqlstate", "migrate_command", "translate_errors"]


def migrate_command(schema: str) -> str:
    """The command that migrates ``schema``, in backquotes: with ``--schema`` unless ``wai``."""
    return "`wai migrate`" if schema == "wai" else f"`wai --schema {schema} migrate`"


def _schema_missing(schema: str, primary: str) -> SchemaNotMigrated:
    return SchemaNotMigrated(
        f"the wai schema {schema!r} is missing or out of date ({primary}): "
        f"run {migrate_command(schema)} or `await client.migrate()`"
    )


def _unique_violation(constraint: str | None, primary: str) -> WaiError:
    if constraint == "jobs_unique_idx":
        return UniqueConflict("a job with the same unique key already exists")
    return DatabaseError(f"unique violation: {primary}")


def _rejected(primary: str) -> ValidationError:
    return ValidationError(f"rejected by the database: {primary}")


@contextmanager
def translate_errors(schema: str) -> Iterator[None]:
    """Re-raise psycopg errors of the wrapped block as :class:`wai.WaiError` subclasses.

    Connection-level failures (``psycopg.OperationalError``) pass through untouched so
    callers can tell "the database is unreachable" from "the request was wrong".
    """
    try:
        yield
    except (pgerr.UndefinedTable, pgerr.InvalidSchemaName, pgerr.UndefinedObject) as exc:
        raise _schema_missing(schema, str(exc.diag.message_primary)) from exc
    except pgerr.UniqueViolation as exc:
        raise _unique_violation(exc.diag.constraint_name, str(exc.diag.message_primary)) from exc
    # psycopg.DataError is every SQLSTATE of class 22 (out-of-range numbers, bad text...);
    # pgerr.DataException alone is only the bare 22000.
    except (pgerr.CheckViolation, pgerr.NotNullViolation, psycopg.DataError) as exc:
        raise _rejected(str(exc.diag.message_primary)) from exc
    except psycopg.OperationalError:
        raise
    except psycopg.Error as exc:
        raise DatabaseError(f"{type(exc).__name__}: {exc}") from exc


def from_sqlstate(
    schema: str, sqlstate: str, primary: str, constraint: str | None, described: str
) -> WaiError:
    """The wai error for a server error of another driver (asyncpg), by its SQLSTATE.

    The same translation as :func:`translate_errors`: ``primary`` is the server's
    message, ``described`` what to say of an error that has no wai meaning.
    """
    if sqlstate in ("42P01", "3F000", "42704"):  # undefined table, schema, object
        return _schema_missing(schema, primary)
    if sqlstate == "23505":
        return _unique_violation(constraint, primary)
    if sqlstate in ("23514", "23502") or sqlstate.startswith("22"):
        return _rejected(primary)
    return DatabaseError(described)
