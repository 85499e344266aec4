"""The ``wai`` command line, run as ``python -m wai`` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import wai
from wai import _migrate as migrate

APP = textwrap.dedent(
    """
    from dataclasses import dataclass
    from pathlib import Path

    import wai

    client = wai.AsyncClient()  # the URL comes from the CLI (WAI_DATABASE_URL)
    not_a_client = 42

    @dataclass
    class Ping:
        n: int

    @client.task(Ping, queue="pings")
    async def ping(job: wai.Job[Ping]) -> None:
        with (Path(__file__).parent / "pings.txt").open("a") as out:
            out.write(f"{job.args.n}\\n")
    """
)


def run_wai(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``python -m wai ARGS`` with no database URL in the environment unless given."""
    base = {k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")}
    return subprocess.run(
        [sys.executable, "-m", "wai", *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_version() -> None:
    result = run_wai("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"wai {wai.__version__}"


def test_migrate_check_fails_then_migrate_applies(empty_database_url: str) -> None:
    versions = [m.version for m in migrate.migrations()]

    check = run_wai("--database-url", empty_database_url, "migrate", "--check")
    assert check.returncode == 1
    assert "pending migrations: " + ", ".join(map(str, versions)) in check.stderr
    assert "wai migrate" in check.stderr

    applied = run_wai("migrate", "--database-url", empty_database_url)
    assert applied.returncode == 0, applied.stderr
    assert "applied migrations" in applied.stdout

    again = run_wai("--database-url", empty_database_url, "migrate", "--check")
    assert again.returncode == 0, again.stderr
    assert "up to date" in again.stdout


def test_migrate_other_schema_via_env(empty_database_url: str) -> None:
    env = {"WAI_DATABASE_URL": empty_database_url}
    assert run_wai("--schema", "wai_other", "migrate", env=env).returncode == 0
    assert run_wai("migrate", "--check", "--schema", "wai_other", env=env).returncode == 0
    assert run_wai("migrate", "--check", env=env).returncode == 1  # schema "wai" untouched


def test_migrate_sql_prints_script_without_a_database() -> None:
    result = run_wai("--database-url", "postgresql://nobody@127.0.0.1:1/none", "migrate", "--sql")
    assert result.returncode == 0, result.stderr
    assert "CREATE TABLE" in result.stdout
    assert result.stdout == migrate.script("wai")
    assert result.stderr == ""


def test_unreachable_database_is_one_clean_line() -> None:
    result = run_wai("--database-url", "postgresql://postgres@127.0.0.1:1/none", "migrate")
    assert result.returncode == 1
    assert result.stderr.startswith("wai: error: cannot connect to the database")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("app", "message"),
    [
        ("nocolon", "APP must be 'module:attribute'"),
        ("app:", "APP must be 'module:attribute'"),
        (":client", "APP must be 'module:attribute'"),
        ("app:client:extra", "APP must be 'module:attribute'"),
        ("no_such_module_xyz:client", "cannot import module 'no_such_module_xyz'"),
        ("app:missing", "module 'app' has no attribute 'missing'"),
        ("app:not_a_client", "is a builtins.int, not a wai.AsyncClient"),
    ],
)
def test_worker_rejects_bad_app(database_url: str, tmp_path: Path, app: str, message: str) -> None:
    (tmp_path / "app.py").write_text(APP)
    result = run_wai("--database-url", database_url, "worker", app, "--burst", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("wai: error: ")
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_worker_rejects_bad_queue_option(database_url: str, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    result = run_wai(
        "--database-url", database_url, "worker", "app:client", "--queue", "pings=many",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--queue expects NAME or NAME=N" in result.stderr


def test_worker_burst_processes_jobs_then_exits(database_url: str, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    with wai.Client(database_url) as client:
        ids = [client.insert({"n": n}, kind="ping", queue="pings").id for n in range(5)]

    result = run_wai(
        "--database-url", database_url,
        "worker", "app:client", "--burst", "--queue", "pings=2", "--poll-interval", "0.1",
        cwd=tmp_path,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert sorted((tmp_path / "pings.txt").read_text().split()) == ["0", "1", "2", "3", "4"]
    with wai.Client(database_url) as client:
        assert {client.get_job(i).state for i in ids} == {wai.JobState.COMPLETED}


def test_worker_refuses_an_unmigrated_schema(empty_database_url: str, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    result = run_wai(
        "worker", "app:client", "--burst", cwd=tmp_path, env={"DATABASE_URL": empty_database_url}
    )
    assert result.returncode == 1
    assert result.stderr.startswith("wai: error: ")
    assert "run `wai migrate`" in result.stderr
    assert "Traceback" not in result.stderr
