"""``wai.contrib.django.insert_job``: a job inserted on Django's own connection."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, cast

import psycopg

from wai._job import JobRow
from wai._unique import UniqueOpts
from wai.bridge import insert_job_sync
from wai.contrib.django._conf import wai_settings
from wai.errors import SchemaNotMigrated, ValidationError

__all__ = ["insert_job", "psycopg_connection"]


def psycopg_connection(raw: object) -> psycopg.Connection[Any]:
    """The psycopg 3 connection under a Django connection, else a clear error.

    ``raw`` is ``django.db.connection.connection``: a ``psycopg.Connection`` when
    psycopg 3 is installed (Django prefers it), a psycopg2 connection otherwise.
    """
    if isinstance(raw, psycopg.Connection):
        return raw  # pyright: ignore[reportUnknownVariableType]
    kind = f"{type(raw).__module__}.{type(raw).__qualname__}"
    raise ValidationError(
        f"wai.contrib.django needs Django's PostgreSQL backend on psycopg 3, but the "
        f"connection is a {kind}: install psycopg 3 (pip install 'wai[django]' or "
        "'psycopg[binary]'), which Django then uses instead of psycopg2"
    )


def insert_job(
    args: Any,
    *,
    using: str | None = None,
    kind: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    run_at: datetime | None = None,
    tags: Iterable[str] = (),
    metadata: Mapping[str, Any] | None = None,
    unique: UniqueOpts | None = None,
    ordering_key: str | None = None,
) -> JobRow:
    """Insert a job on Django's connection ``using`` (default ``settings.WAI['DATABASE']``).

    The job is part of the connection's current transaction: inside
    ``transaction.atomic()`` it commits or rolls back with your rows (a nested
    atomic block that rolls back removes it too); in autocommit mode it is its own
    statement. No ``transaction.on_commit`` is needed. The options are those of
    :func:`wai.bridge.insert_job_sync`; the schema is ``settings.WAI['SCHEMA']``.
    Returns the inserted :class:`wai.JobRow`.
    """
    from django.db import connections

    conf = wai_settings()
    alias = using if using is not None else conf.database
    if alias not in connections:
        raise ValidationError(f"settings.DATABASES has no alias {alias!r}")
    connection = cast("Any", connections[alias])  # Django ships no types
    connection.ensure_connection()
    conn = psycopg_connection(connection.connection)
    try:
        return insert_job_sync(
            conn,
            args,
            kind=kind,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            run_at=run_at,
            tags=tags,
            metadata=metadata,
            unique=unique,
            ordering_key=ordering_key,
            schema=conf.schema,
        )
    except SchemaNotMigrated as exc:
        raise SchemaNotMigrated(
            f"{exc} (in this Django project: python manage.py wai_migrate)"
        ) from None
