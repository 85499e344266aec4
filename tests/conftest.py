"""Fixtures on a real PostgreSQL server (never mocks).

Connection settings come from the standard libpq variables (``PGHOST``,
``PGPORT``, ``PGUSER``, ``PGPASSWORD``...), defaulting to a local server at
127.0.0.1:5432 as ``postgres``.

- ``template_db`` (session): each xdist worker creates ``wai_tpl_<worker>_<pid>``
  and runs wai's migrations in it once.
- ``database_url`` (function): a fresh clone of the template
  (``CREATE DATABASE ... TEMPLATE``) for each test, dropped ``WITH (FORCE)``
  afterwards. A background thread clones the next database while a test runs.
- ``shared_database_url`` (session): one clone for tests that write nothing.
- ``empty_database_url`` (function): a fresh database without any wai schema
  (a clone of ``template0``, made ahead and dropped in the background too).
- ``aclient`` / ``sclient`` (function): an opened ``wai.AsyncClient`` /
  ``wai.Client`` on ``database_url``, closed at teardown.

Never connect to the template itself: PostgreSQL refuses to clone a database
that has other sessions. The pid in the names keeps concurrent pytest runs on
one server apart; databases of runs whose process is gone are dropped when the
next run starts.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from psycopg import sql

import wai
from wai import registry as wai_registry
from wai.kinds import undeclare

os.environ.setdefault("PGHOST", "127.0.0.1")
os.environ.setdefault("PGPORT", "5432")
os.environ.setdefault("PGUSER", "postgres")

#: The database the fixtures connect to for CREATE/DROP DATABASE.
ADMIN_DB = os.environ.get("WAI_TEST_ADMIN_DB", "postgres")


def database_url_for(name: str) -> str:
    """A ``postgresql://`` URL for database ``name`` on the configured server.

    The password, if any, stays in ``PGPASSWORD``, which libpq reads itself.
    """
    host = os.environ["PGHOST"]
    user = quote(os.environ["PGUSER"], safe="")
    port = os.environ["PGPORT"]
    if host.startswith("/"):  # a Unix socket directory
        return f"postgresql://{user}@/{name}?host={quote(host, safe='')}&port={port}"
    return f"postgresql://{user}@{quote(host, safe='')}:{port}/{name}"


def _admin(statement: sql.Composed) -> None:
    with psycopg.connect(dbname=ADMIN_DB, autocommit=True) as conn:
        conn.execute(statement)


def create_database(name: str, template: str | None = None) -> None:
    """``CREATE DATABASE name [TEMPLATE template]``."""
    stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        stmt = sql.SQL("{} TEMPLATE {}").format(stmt, sql.Identifier(template))
    _admin(stmt)


def drop_database(name: str) -> None:
    """``DROP DATABASE IF EXISTS name WITH (FORCE)``, disconnecting any session."""
    _admin(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _worker_tag() -> str:
    """``gw0_<pid>`` under pytest-xdist, else ``main_<pid>``.

    The pid keeps concurrent pytest runs against one server apart, and tells a
    later run which leftovers belong to a process that no longer exists.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main").lower()
    return f"{worker}_{os.getpid()}"


_OURS = re.compile(r"^wai_(?:tpl|test)_[a-z0-9]+_(\d+)(?:_[0-9a-f]+)?$")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _drop_leftovers() -> None:
    """Drop test databases of earlier runs whose process is gone (interrupted runs)."""
    with psycopg.connect(dbname=ADMIN_DB, autocommit=True) as conn:
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database").fetchall()]
    for name in names:
        m = _OURS.match(name)
        if m and not _pid_alive(int(m[1])):
            drop_database(name)


class Clones:
    """Databases cloned from a template one step ahead of the tests that use them.

    A single background thread creates the next clone while the current test
    runs and drops used clones afterwards, so a test rarely waits for either.
    """

    def __init__(self, template: str, prefix: str) -> None:
        self.template = template
        self.prefix = prefix
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wai-clones")
        self._next: Future[str] | None = None
        self._drops: list[Future[None]] = []

    def _create(self) -> str:
        name = f"{self.prefix}_{uuid.uuid4().hex[:12]}"
        create_database(name, template=self.template)
        return name

    def take(self) -> str:
        """A fresh clone of the template, for one test."""
        pending = self._next or self._thread.submit(self._create)
        self._next = self._thread.submit(self._create)
        return pending.result()

    def release(self, name: str) -> None:
        """Drop ``name`` in the background."""
        self._drops.append(self._thread.submit(drop_database, name))

    def close(self) -> None:
        """Drop the clone made ahead, wait for every drop and surface their errors."""
        if self._next is not None:
            self.release(self._next.result())
            self._next = None
        self._thread.shutdown(wait=True)
        for done in self._drops:
            done.result()


@pytest.fixture(scope="session")
def _no_leftovers() -> None:
    _drop_leftovers()


@pytest.fixture(scope="session")
def template_db(_no_leftovers: None) -> Iterator[str]:
    """The name of this worker's migrated template database (created fresh)."""
    name = f"wai_tpl_{_worker_tag()}"
    create_database(name)
    with wai.Client(database_url_for(name)) as client:
        client.migrate()
    yield name
    drop_database(name)


@pytest.fixture(scope="session")
def _clones(template_db: str) -> Iterator[Clones]:
    clones = Clones(template_db, f"wai_test_{_worker_tag()}")
    yield clones
    clones.close()


@pytest.fixture(scope="session")
def _empties(_no_leftovers: None) -> Iterator[Clones]:
    clones = Clones("template0", f"wai_test_{_worker_tag()}")
    yield clones
    clones.close()


@pytest.fixture
def database_url(_clones: Clones) -> Iterator[str]:
    """URL of a fresh, migrated database of this test's own (dropped afterwards)."""
    name = _clones.take()
    yield database_url_for(name)
    _clones.release(name)


@pytest.fixture(scope="session")
def shared_database_url(_clones: Clones) -> Iterator[str]:
    """URL of one migrated database shared by every test of this worker that writes nothing.

    For the many cases of "bad input is rejected and leaves the table empty": each
    such test must assert that the jobs table is still empty when it ends.
    """
    name = _clones.take()
    yield database_url_for(name)
    _clones.release(name)


@pytest.fixture
def empty_database_url(_empties: Clones) -> Iterator[str]:
    """URL of a fresh database with no wai schema at all (for migration tests)."""
    name = _empties.take()
    yield database_url_for(name)
    _empties.release(name)


@pytest.fixture
async def aclient(database_url: str) -> AsyncIterator[wai.AsyncClient]:
    """An opened :class:`wai.AsyncClient` on the test's database."""
    client = wai.AsyncClient(database_url)
    await client.open()
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def sclient(database_url: str) -> Iterator[wai.Client]:
    """An opened :class:`wai.Client` on the test's database."""
    client = wai.Client(database_url)
    client.open()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(autouse=True)
def _isolated_known_queues() -> Iterator[None]:
    """Undo each test's task registrations in wai's process-wide state.

    ``@client.task(..., queue=...)`` also records the queue for inserts made without
    that client (``wai.bridge``), and declares its options onto an args type that
    declares none; without this, one test's registrations would route another test's
    inserts.
    """
    known: dict[str, str] | None = getattr(wai_registry, "_KNOWN_QUEUES", None)
    saved = dict(known) if known is not None else None
    stamped: list[type[Any]] = getattr(wai_registry, "_DECLARED_BY_TASKS", [])
    mark = len(stamped)
    yield
    if known is not None and saved is not None:
        known.clear()
        known.update(saved)
    while len(stamped) > mark:
        undeclare(stamped.pop())
