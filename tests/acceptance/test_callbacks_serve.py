"""``wai callbacks serve APP`` in a subprocess: signed requests resolve, forged ones do not."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

import wai
from tests.acceptance.test_cli import run_wai
from tests.integration._helpers import fetch
from tests.integration.test_callbacks import parked
from wai.callbacks.signing import callback_url, sign

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SECRET = "acceptance-secret-0123456789abcdef0123456789"

# The APP's registry holds the follow-up spec: the receipt commits with the completion.
APP = textwrap.dedent(
    """
    from dataclasses import dataclass

    import wai

    client = wai.AsyncClient()  # the URL comes from the CLI (WAI_DATABASE_URL)

    @dataclass
    class Pay:
        order: int

    @dataclass
    class Receipt:
        order: int

    client.on_completed_enqueue(Pay, lambda args, job: Receipt(order=args.order), name="receipt")
    """
)


def _read(log: Path) -> str:
    return log.read_text(errors="replace")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait_listening(base: str, proc: asyncio.subprocess.Process, log: Path) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(300):
            if proc.returncode is not None:
                raise AssertionError(f"exited {proc.returncode}\n{_read(log)}")
            with contextlib.suppress(httpx.TransportError):
                await http.get(base + "/")
                return
            await asyncio.sleep(0.05)
    raise AssertionError(f"never listened\n{_read(log)}")


@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_callbacks_serve_completes_a_parked_job_and_refuses_a_forged_one(
    aclient: wai.AsyncClient, database_url: str, tmp_path: Path, log_format: str
) -> None:
    (tmp_path / "app.py").write_text(APP)
    row, cid = await parked(aclient)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")}
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "wai",
            "--database-url",
            database_url,
            "callbacks",
            "serve",
            "app:client",
            "--secret-env",
            "HOOK_SECRET",
            "--port",
            str(port),
            "--log-format",
            log_format,
            "--log-level",
            "debug",
            cwd=tmp_path,
            env={**env, "HOOK_SECRET": SECRET},
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        await _wait_listening(base, proc, log)
        body = b'{"payload": {"charge": "ch_1"}}'
        url = callback_url(base, cid, "complete")
        async with httpx.AsyncClient() as http:
            forged = await http.post(
                url, content=body, headers=sign(b"f" * 32, cid, "complete", body)
            )
            assert forged.status_code == 401
            assert (await aclient.get_job(row.id)).state == "waiting_external"

            signed = sign(SECRET.encode(), cid, "complete", body)
            response = await http.post(url, content=body, headers=signed)
            assert response.status_code == 200, response.text
            assert response.json() == {"job_id": row.id, "state": "completed"}
            # a replay of the applied request is refused; a new one finds the id spent
            assert (await http.post(url, content=body, headers=signed)).status_code == 409
            again = sign(SECRET.encode(), cid, "complete", body)
            assert (await http.post(url, content=body, headers=again)).status_code == 404
        done = await aclient.get_job(row.id)
        assert (done.state, done.callback_result) == ("completed", {"charge": "ch_1"})
        [receipt] = await aclient.list_jobs(trigger_job_id=row.id)
        assert receipt.kind == "receipt"
        assert await fetch(aclient, "SELECT * FROM wai.outbox") == []  # in-process, atomic

        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0, _read(log)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    output = _read(log)
    assert "callback ingress on http://127.0.0.1" in output
    if log_format == "json":
        records = [json.loads(line) for line in output.splitlines()]  # every line is JSON
        [completion] = [r for r in records if r["logger"] == "wai.jobs"]
        assert completion["level"] == "DEBUG"
        assert (completion["job_id"], completion["kind"], completion["queue"]) == (
            row.id,
            "pay",
            "q",
        )
        assert (completion["attempt"], completion["outcome"]) == (1, "completed")
        assert completion["callback_id"] == str(cid)
        refused = [r for r in records if r["logger"] == "wai.ingress"]
        assert [r["level"] for r in refused] == ["INFO", "INFO"]  # forged, then the replay
        assert {r["callback_id"] for r in refused} == {str(cid)}
        assert any(r["logger"] == "uvicorn.access" for r in records)


@pytest.mark.parametrize(
    ("secret", "message"),
    [
        (None, "HOOK_SECRET: the environment variable is not set"),
        ("too-short", "at least 32 bytes"),
    ],
)
def test_callbacks_serve_needs_a_long_secret(
    tmp_path: Path, secret: str | None, message: str
) -> None:
    (tmp_path / "app.py").write_text(APP)
    env = {} if secret is None else {"HOOK_SECRET": secret}
    result = run_wai(
        "--database-url",
        "postgresql://nobody@127.0.0.1:1/none",  # never reached: the secret is checked first
        "callbacks",
        "serve",
        "app:client",
        "--secret-env",
        "HOOK_SECRET",
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
