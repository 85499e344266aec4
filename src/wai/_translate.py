"""Turns PostgreSQL errors into wai errors that say what to do."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pgerr

from wai.errors import DatabaseError, SchemaNotMigrated, UniqueConflict, ValidationError

__all__ = ["migrate_command", "translate_errors"]


def migrate_command(schema: str) -> str:
    """The command that migrates ``schema``, in backquotes: with ``--schema`` unless ``wai``."""
    return "`wai migrate`" if schema == "wai" else f"`wai --schema {schema} migrate`"


@contextmanager
def translate_errors(schema: str) -> Iterator[None]:
    """Re-raise psycopg errors of the wrapped block as :class:`wai.WaiError` subclasses.

    Connection-level failures (``psycopg.OperationalError``) pass through untouched so
    callers can tell "the database is unreachable" from "the request was wrong".
    """
    try:
        yield
    except (pgerr.UndefinedTable, pgerr.InvalidSchemaName, pgerr.UndefinedObject) as exc:
        raise SchemaNotMigrated(
            f"the wai schema {schema!r} is missing or out of date ({exc.diag.message_primary}): "
            f"run {migrate_command(schema)} or `await client.migrate()`"
        ) from exc
    except pgerr.UniqueViolation as exc:
        if exc.diag.constraint_name == "jobs_unique_idx":
            raise UniqueConflict("a job with the same unique key already exists") from exc
        raise DatabaseError(f"unique violation: {exc.diag.message_primary}") from exc
    # psycopg.DataError is every SQLSTATE of class 22 (out-of-range numbers, bad text...);
    # pgerr.DataException alone is only the bare 22000.
    except (pgerr.CheckViolation, pgerr.NotNullViolation, psycopg.DataError) as exc:
        raise ValidationError(f"rejected by the database: {exc.diag.message_primary}") from exc
    except psycopg.OperationalError:
        raise
    except psycopg.Error as exc:
        raise DatabaseError(f"{type(exc).__name__}: {exc}") from exc
