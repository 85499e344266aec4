"""``manage.py wai_migrate`` and ``manage.py wai_worker`` as processes of a small project."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from wai.bridge import insert_job_sync

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SRC = Path(__file__).resolve().parents[2] / "src"

MANAGE = """
import sys

from django.core.management import execute_from_command_line

execute_from_command_line(sys.argv)
"""

SETTINGS = """
DATABASES = {{"default": {{
    "ENGINE": "django.db.backends.postgresql",
    "NAME": {dbname!r}, "USER": {user!r}, "HOST": {host!r}, "PORT": {port!r},
}}}}
INSTALLED_APPS = ["wai.contrib.django"]
USE_TZ = True
SECRET_KEY = "not secret"
WAI = {wai!r}
"""

TASKS = """
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

import wai
from wai.contrib.django import database_url, wai_settings

client = wai.AsyncClient(database_url(), schema=wai_settings().schema)


@dataclass
class Stamp:
    text: str


@client.task(Stamp, queue="stamps")
def stamp(job: wai.Job[Stamp]) -> None:
    assert settings.SECRET_KEY == "not secret"  # Django is set up in the worker
    with connection.cursor() as cur:  # and its ORM connection works in the handler
        cur.execute("SELECT upper(%s)", [job.args.text])
        (text,) = cur.fetchone()
    assert text == job.args.text.upper()
"""


def _project(tmp_path: Path, url: str, **wai: Any) -> Path:
    params = conninfo_to_dict(url)
    (tmp_path / "manage.py").write_text(MANAGE)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "__init__.py").write_text("")
    (proj / "tasks.py").write_text(TASKS)
    (proj / "settings.py").write_text(
        textwrap.dedent(
            SETTINGS.format(
                dbname=params["dbname"],
                user=params.get("user", ""),
                host=params.get("host", ""),
                port=str(params.get("port", "")),
                wai=wai,
            )
        )
    )
    return tmp_path


def _manage(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "proj.settings",
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("WAI_DATABASE_URL", None)
    env.pop("DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_wai_migrate_creates_the_schema_of_a_fresh_database(
    tmp_path: Path, empty_database_url: str
) -> None:
    project = _project(tmp_path, empty_database_url, SCHEMA="shop_jobs")

    check = _manage(project, "wai_migrate", "--check")
    assert check.returncode == 1, check.stderr
    assert "schema 'shop_jobs' of database 'default' has pending migrations: 1, 2" in check.stderr
    assert "python manage.py wai_migrate" in check.stderr

    applied = _manage(project, "wai_migrate")
    assert applied.returncode == 0, applied.stderr
    assert "schema 'shop_jobs' of database 'default': applied migrations 1, 2" in applied.stdout
    with psycopg.connect(empty_database_url) as conn:
        assert conn.execute("SELECT to_regclass('shop_jobs.jobs')").fetchone() == (
            "shop_jobs.jobs",
        )

    again = _manage(project, "wai_migrate", "--check")
    assert again.returncode == 0, again.stderr
    assert "is up to date" in again.stdout


def test_wai_migrate_sql_prints_the_migrations(tmp_path: Path, empty_database_url: str) -> None:
    project = _project(tmp_path, empty_database_url)
    printed = _manage(project, "wai_migrate", "--sql")
    assert printed.returncode == 0, printed.stderr
    assert 'CREATE SCHEMA IF NOT EXISTS "wai"' in printed.stdout
    assert 'CREATE TABLE "wai".jobs' in printed.stdout


def test_wai_worker_burst_runs_a_job_to_completion(tmp_path: Path, database_url: str) -> None:
    project = _project(tmp_path, database_url, APP="proj.tasks:client")
    with psycopg.connect(database_url) as conn:
        job = insert_job_sync(conn, {"text": "hello"}, kind="stamp", queue="stamps")

    done = _manage(project, "wai_worker", "--burst", "--poll-interval", "0.2")
    assert done.returncode == 0, done.stderr
    assert "worker for proj.tasks:client: queues stamps, schema 'wai'" in done.stderr
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT state, attempt FROM wai.jobs WHERE id = %s", (job.id,)
        ).fetchone()
    assert row == ("completed", 1), done.stderr


def test_wai_worker_processes_runs_its_jobs_in_django_set_up_children(
    tmp_path: Path, database_url: str
) -> None:
    """``--processes 2 --burst``: two children (``python -m django wai_worker``, the same
    settings), each with Django set up for its handlers, finish every job and exit."""
    project = _project(tmp_path, database_url, APP="proj.tasks:client")
    with psycopg.connect(database_url) as conn:
        ids = [
            insert_job_sync(conn, {"text": f"hello {i}"}, kind="stamp", queue="stamps").id
            for i in range(20)
        ]
    done = _manage(project, "wai_worker", "--processes", "2", "--burst", "--poll-interval", "0.2")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("started (pid") == 2, done.stderr
    with psycopg.connect(database_url) as conn:
        states = conn.execute(
            "SELECT state, count(*) FROM wai.jobs WHERE id = ANY(%s) GROUP BY state", (ids,)
        ).fetchall()
    assert states == [("completed", 20)], done.stderr


def test_wai_worker_on_an_unmigrated_database_says_to_run_wai_migrate(
    tmp_path: Path, empty_database_url: str
) -> None:
    project = _project(tmp_path, empty_database_url, APP="proj.tasks:client")
    refused = _manage(project, "wai_worker", "--burst")
    assert refused.returncode == 1
    assert "python manage.py wai_migrate" in refused.stderr


@pytest.mark.parametrize(
    ("wai", "message"),
    [
        ({}, "no APP to run: set settings.WAI['APP']"),
        ({"APP": "proj.tasks:client", "SCHEMA": "Bad-Name"}, "settings.WAI['SCHEMA']: invalid"),
        ({"APP": "proj.tasks"}, "settings.WAI['APP']: APP must be 'module:attribute'"),
    ],
)
def test_wai_worker_with_bad_settings_says_what_is_wrong(
    tmp_path: Path, shared_database_url: str, wai: dict[str, str], message: str
) -> None:
    project = _project(tmp_path, shared_database_url, **wai)
    refused = _manage(project, "wai_worker", "--burst")
    assert refused.returncode == 2
    assert message in refused.stderr
    assert "Traceback" not in refused.stderr
