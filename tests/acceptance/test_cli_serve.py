"""``wai serve`` in a subprocess: probes, the API, the token from ``--token-env``, clean stops."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

import wai
from tests.acceptance.test_callbacks_serve import _free_port, _read
from tests.acceptance.test_cli import run_wai
from tests.integration._helpers import fetch
from tests.integration.test_admin import make

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

TOKEN = "serve-acceptance-token-4d1f0a9b"

APP = textwrap.dedent(
    """
    import wai

    client = wai.AsyncClient()  # the URL comes from the CLI (WAI_DATABASE_URL)
    """
)


@contextlib.asynccontextmanager
async def serving(
    *args: str, cwd: Path, env: dict[str, str], log: Path
) -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    """``python -m wai ARGS serve --port P`` running; yields its base URL and process."""
    port = _free_port()
    base = {k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")}
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "wai",
            *args,
            "--port",
            str(port),
            cwd=cwd,
            env={**base, **env},
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as http:
            for _ in range(400):
                if proc.returncode is not None:
                    raise AssertionError(f"exited {proc.returncode}\n{_read(log)}")
                with contextlib.suppress(httpx.TransportError):
                    if (await http.get(url + "/healthz")).status_code == 200:
                        break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"never answered\n{_read(log)}")
        yield url, proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def stops_cleanly(proc: asyncio.subprocess.Process, sig: signal.Signals, log: Path) -> None:
    proc.send_signal(sig)
    assert await asyncio.wait_for(proc.wait(), 30) == 0, _read(log)


async def test_serve_app_with_a_token_serves_reads_and_authorized_mutations(
    aclient: wai.AsyncClient, database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text(APP)
    row = await make(aclient, "available")
    log = tmp_path / "serve.log"
    args = ("--database-url", database_url, "serve", "app:client", "--token-env", "ADMIN_TOKEN")
    async with serving(*args, cwd=tmp_path, env={"ADMIN_TOKEN": TOKEN}, log=log) as (url, proc):
        async with httpx.AsyncClient(base_url=url) as http:
            assert (await http.get("/healthz")).json()["live"] is True
            ready = await http.get("/readyz")
            assert (ready.status_code, ready.json()["ready"]) == (200, True)
            queues = await http.get("/api/v1/queues")
            assert queues.status_code == 200
            assert queues.headers["content-type"] == "application/json"
            assert [q["name"] for q in queues.json()["items"]] == ["q"]
            doc = (await http.get("/api/v1/openapi.json")).json()
            assert doc["servers"][0]["url"] == "/"

            refused = await http.post("/api/v1/queues/q/pause")
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"] == "Bearer"
            wrong = await http.post("/api/v1/queues/q/pause", headers={"Authorization": "Bearer x"})
            assert wrong.status_code == 401
            assert await fetch(aclient, "SELECT name FROM wai.queues WHERE paused") == []

            auth = {"Authorization": f"Bearer {TOKEN}"}
            paused = await http.post("/api/v1/queues/q/pause", headers=auth)
            assert paused.json() == {"queue": "q", "paused": True}
            cancelled = await http.post(f"/api/v1/jobs/{row.id}/cancel", headers=auth)
            assert cancelled.json()["state"] == "cancelled"
        assert await fetch(aclient, "SELECT name FROM wai.queues WHERE paused") == [("q",)]
        await stops_cleanly(proc, signal.SIGTERM, log)
    output = _read(log)
    assert "admin API on http://127.0.0.1:" in output
    assert "mutations need the bearer token" in output
    assert TOKEN not in output


@pytest.mark.parametrize(
    ("token_env", "env", "note"),
    [
        ((), {}, "no --token-env: serving read-only"),
        (("--token-env", "ADMIN_TOKEN"), {}, "ADMIN_TOKEN: the variable is not set"),
        (("--token-env", "ADMIN_TOKEN"), {"ADMIN_TOKEN": ""}, "ADMIN_TOKEN: the variable is not"),
    ],
    ids=["no-option", "unset", "empty"],
)
async def test_serve_without_a_token_is_read_only_and_stops_on_sigint(
    aclient: wai.AsyncClient,
    database_url: str,
    tmp_path: Path,
    token_env: tuple[str, ...],
    env: dict[str, str],
    note: str,
) -> None:
    row = await make(aclient, "available")
    log = tmp_path / "serve.log"
    args = ("--database-url", database_url, "serve", *token_env)
    async with serving(*args, cwd=tmp_path, env=env, log=log) as (url, proc):
        async with httpx.AsyncClient(base_url=url) as http:
            jobs = await http.get("/api/v1/jobs")
            assert [j["id"] for j in jobs.json()["items"]] == [row.id]
            for headers in ({}, {"Authorization": f"Bearer {TOKEN}"}, {"Authorization": "Bearer"}):
                refused = await http.post(f"/api/v1/jobs/{row.id}/cancel", headers=headers)
                assert refused.status_code == 403, refused.text
                assert refused.json()["error"]["code"] == "read_only"
        assert (await aclient.get_job(row.id)).state == "available"
        await stops_cleanly(proc, signal.SIGINT, log)
    output = _read(log)
    assert note in output
    assert "(read-only)" in output


async def test_serve_on_an_unmigrated_database_starts_but_is_not_ready(
    empty_database_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    args = ("--database-url", empty_database_url, "serve")
    async with serving(*args, cwd=tmp_path, env={}, log=log) as (url, proc):
        async with httpx.AsyncClient(base_url=url) as http:
            ready = await http.get("/readyz")
            assert ready.status_code == 503
            assert ready.json()["schema_current"] is False
            jobs = await http.get("/api/v1/jobs")
            assert jobs.status_code == 503
        await stops_cleanly(proc, signal.SIGTERM, log)
    assert "wai migrate" in _read(log)


def test_serve_on_a_port_in_use_is_an_error_before_it_starts(database_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = run_wai("--database-url", database_url, "serve", "--port", port)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"wai: error: cannot listen on 127.0.0.1:{port}: the address is already in use "
        "(another server?): pass another --port"
    ]
