"""The pytest plugin of wai.testing: a database URL and a client on a fresh schema per test.

Registered through the ``pytest11`` entry point ``wai``, so it loads wherever wai is
installed; ``-p no:wai`` turns it off. It adds only fixtures, and a fixture does
nothing until a test asks for it: no hook, option or server start of its own.

- ``wai_database_url`` (session): ``WAI_TEST_DATABASE_URL``, else ``WAI_DATABASE_URL``,
  else ``DATABASE_URL``; with none set, wai's embedded PostgreSQL in its per-user data
  directory (the one ``wai`` commands use), released when the session ends.
- ``wai_app`` (function): None here. Override it in your ``conftest.py`` to return your
  application's client (``wai.AsyncClient`` or ``wai.Client``): ``wai_client`` then
  serves a copy of its registry (its tasks, hooks, follow-up specs and schedules).
- ``wai_client`` (function, async): an opened ``wai.AsyncClient`` on a fresh schema of
  ``wai_database_url``, migrated; closed and its schema dropped after the test.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

try:
    from pytest_asyncio import fixture as _async_fixture
except ImportError:  # pragma: no cover - pytest then says an async fixture needs a plugin
    _async_fixture = pytest.fixture  # pyright: ignore[reportConstantRedefinition]

from wai import _embedded as embedded
from wai.client import AsyncClient

__all__ = ["wai_app", "wai_client", "wai_database_url"]

#: Where the database URL of the tests comes from, first set first.
URL_VARIABLES = ("WAI_TEST_DATABASE_URL", "WAI_DATABASE_URL", "DATABASE_URL")


@pytest.fixture(scope="session")
def wai_database_url() -> Iterator[str]:
    """The database the tests' schemas live in (see the module docstring for where from)."""
    for name in URL_VARIABLES:
        url = os.environ.get(name)
        if url:
            yield url
            return
    server = embedded.start()
    try:
        yield server.url
    finally:
        embedded.release(server)


@pytest.fixture
def wai_app() -> Any:
    """Your application's client, whose registry ``wai_client`` serves; None: an empty one.

    Override it in ``conftest.py``::

        @pytest.fixture
        def wai_app():
            from myapp.jobs import client
            return client
    """
    return None


@_async_fixture
async def wai_client(wai_database_url: str, wai_app: Any) -> AsyncIterator[AsyncClient]:
    """An opened, migrated ``wai.AsyncClient`` on a schema of its own, dropped afterwards."""
    schema = f"wai_test_{uuid.uuid4().hex[:16]}"
    registry = wai_app.registry.copy() if wai_app is not None else None
    client = AsyncClient(wai_database_url, schema=schema, registry=registry)
    try:
        await client.open()
        await client.migrate()
        yield client
    finally:
        await client.close()  # its workers too, if the test started them
        async with await psycopg.AsyncConnection.connect(wai_database_url, autocommit=True) as conn:
            await conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )
