"""``wai embedded status|stop|reset``, run as ``python -m wai`` in a subprocess.

The tests share one data directory (``initdb`` takes seconds); the server is
started in this process (a holder, as another wai command would be) when a test
needs one running.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.test_cli import run_wai
from tests.integration.test_embedded import NEEDS_WHEEL, answers, scratch_data_dir
from wai import _embedded as embedded

pytestmark = [pytest.mark.slow, NEEDS_WHEEL]


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    with scratch_data_dir() as path:
        yield path


@pytest.fixture(autouse=True)
def _stopped_after(data_dir: Path) -> Iterator[None]:
    yield
    embedded.stop(data_dir)
    embedded._claims.clear()  # pyright: ignore[reportPrivateUsage]


def wai_embedded(data_dir: Path, *args: str) -> tuple[int, str, str]:
    result = run_wai("embedded", *args, env={"WAI_EMBEDDED_DIR": str(data_dir)}, timeout=60)
    assert "Traceback" not in result.stderr
    return result.returncode, result.stdout, result.stderr


def status_json(data_dir: Path) -> dict[str, Any]:
    code, out, err = wai_embedded(data_dir, "status", "--json")
    assert code == 0, err
    return json.loads(out)


def test_status_of_a_directory_not_created_yet(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "pg"
    code, out, _ = wai_embedded(missing, "status")
    assert code == 0
    assert f"data directory  {missing}" in out
    assert "not created yet" in out
    assert status_json(missing) == {
        "data_dir": str(missing),
        "exists": False,
        "pg_version": None,
        "running": False,
        "pid": None,
        "url": None,
        "holders": [],
        "size_bytes": 0,
        "log": str(missing / "wai-server.log"),
    }
    code, out, _ = wai_embedded(missing, "stop")
    assert (code, out.strip()) == (0, f"no embedded PostgreSQL runs in {missing}")
    code, out, _ = wai_embedded(missing, "reset", "--yes")
    assert (code, out.strip()) == (0, f"nothing to reset: {missing} does not exist")
    assert not missing.parent.exists()  # none of them created anything


def test_status_of_a_running_server_then_stop(data_dir: Path) -> None:
    server = embedded.start(data_dir)  # this test process is its holder
    pid = int((data_dir / "postmaster.pid").read_text().splitlines()[0])

    found = status_json(data_dir)
    assert found["running"] is True
    assert found["pid"] == pid
    assert found["url"] == server.url
    assert found["holders"] == [{"pid": os.getpid(), "alive": True}]
    assert found["size_bytes"] > 10_000_000
    assert found["pg_version"]
    code, out, _ = wai_embedded(data_dir, "status")
    assert code == 0
    assert f"server          running, pid {pid}" in out
    assert f"holders         {os.getpid()} (running)" in out
    assert "size on disk    " in out
    assert " MB" in out

    code, out, _ = wai_embedded(data_dir, "stop")  # stops it, though this process holds it
    assert code == 0
    assert f"stopped the embedded PostgreSQL in {data_dir}" in out
    assert f"in use by wai process {os.getpid()}" in out
    assert not answers(server.url)
    after = status_json(data_dir)
    assert (after["running"], after["pid"], after["holders"]) == (False, None, [])

    code, out, _ = wai_embedded(data_dir, "stop")
    assert (code, out.strip()) == (0, f"no embedded PostgreSQL runs in {data_dir}")
    embedded.release(server)


def test_status_and_stop_never_start_a_server(data_dir: Path) -> None:
    embedded.start(data_dir)
    embedded.stop(data_dir)
    for args in (("status",), ("status", "--json"), ("stop",)):
        code, _, _ = wai_embedded(data_dir, *args)
        assert code == 0
        assert not (data_dir / "postmaster.pid").exists()
    code, out, _ = wai_embedded(data_dir, "status")
    assert "server          not running" in out


def test_status_says_when_a_database_url_is_configured(data_dir: Path) -> None:
    result = run_wai(
        "embedded",
        "status",
        env={"WAI_EMBEDDED_DIR": str(data_dir), "WAI_DATABASE_URL": "postgresql://elsewhere/db"},
    )
    assert result.returncode == 0
    assert "wai commands use that database, not this one" in result.stderr


def test_reset_refuses_without_yes_when_stdin_is_not_a_terminal(data_dir: Path) -> None:
    embedded.start(data_dir)
    embedded.stop(data_dir)
    code, _, err = wai_embedded(data_dir, "reset")
    assert code == 2
    assert "pass --yes" in err
    assert (data_dir / "PG_VERSION").exists()  # nothing deleted


def test_reset_refuses_a_directory_that_is_not_a_data_directory(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    code, _, err = wai_embedded(tmp_path, "reset", "--yes")
    assert code == 1
    assert "not a PostgreSQL data directory" in err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_reset_stops_the_server_and_deletes_the_directory(data_dir: Path) -> None:
    # Last in this module: the shared data directory is gone afterwards.
    server = embedded.start(data_dir)
    code, out, _ = wai_embedded(data_dir, "reset", "-y")
    assert code == 0
    assert f"deleted {data_dir}" in out
    assert not answers(server.url)
    assert not data_dir.exists()
    assert status_json(data_dir)["exists"] is False
    embedded.release(server)
