"""``wai worker --metrics-port``: /metrics scraped and parsed with prometheus_client's
parser after a known workload, /healthz and /readyz, one port per process of
``--processes``, and a port in use refused before anything starts."""

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
from prometheus_client.parser import text_string_to_metric_families

import wai
from tests.acceptance.test_callbacks_serve import _read
from tests.acceptance.test_cli import run_wai

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

APP = textwrap.dedent(
    """
    from dataclasses import dataclass

    import wai

    client = wai.AsyncClient()  # the URL comes from the CLI (WAI_DATABASE_URL)

    @dataclass
    class Ping:
        n: int

    @client.task(Ping, queue="pings")
    async def ping(job: wai.Job[Ping]) -> None:
        return None

    @dataclass
    class Wobbly:
        n: int

    @client.task(Wobbly, queue="pings", max_attempts=3)
    async def wobbly(job: wai.Job[Wobbly]):
        return wai.RetryAfter(0.05) if job.attempt == 1 else None
    """
)

FAST = ("--poll-interval", "0.1", "--election-interval", "0.2", "--promote-interval", "0.05")


def free_ports(n: int) -> int:
    """The first of ``n`` consecutive free ports."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = int(s.getsockname()[1])
        if first + n > 65535:
            continue
        ok = True
        for port in range(first, first + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return first
    raise AssertionError("no run of free ports")


@contextlib.asynccontextmanager
async def worker(
    database_url: str, cwd: Path, log: Path, *args: str
) -> AsyncIterator[asyncio.subprocess.Process]:
    env = {k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")}
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "wai", "--database-url", database_url,
            "worker", "app:client", *FAST, *args,
            cwd=cwd, env=env, stdout=out, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def answering(
    http: httpx.AsyncClient, url: str, proc: asyncio.subprocess.Process, log: Path
) -> None:
    for _ in range(400):
        if proc.returncode is not None:
            raise AssertionError(f"exited {proc.returncode}\n{_read(log)}")
        with contextlib.suppress(httpx.TransportError):
            if (await http.get(url + "/healthz")).status_code == 200:
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never answered\n{_read(log)}")


def scrape(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_metrics_after_a_known_workload_and_the_probes(
    database_url: str, aclient: wai.AsyncClient, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text(APP)
    for i in range(7):
        await aclient.insert({"n": i}, kind="ping", queue="pings")
    for i in range(2):
        await aclient.insert({"n": i}, kind="wobbly", queue="pings")
    port = free_ports(1)
    log = tmp_path / "worker.log"
    url = f"http://127.0.0.1:{port}"
    async with (
        worker(
            database_url, tmp_path, log, "--metrics-port", str(port), "--metrics-host", "127.0.0.1"
        ) as proc,
        httpx.AsyncClient(timeout=10) as http,
    ):
        await answering(http, url, proc, log)
        ready = await http.get(url + "/readyz")
        assert ready.status_code == 200, ready.text

        async def finished() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
            response = await http.get(url + "/metrics")
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/plain")
            samples = scrape(response.text)
            key = ("wai_jobs_completed_total", (("kind", "wobbly"), ("queue", "pings")))
            return samples if samples.get(key) == 2 else None

        samples = None
        for _ in range(200):
            samples = await finished()
            if samples is not None:
                break
            await asyncio.sleep(0.05)
        assert samples is not None, _read(log)
        pings = (("kind", "ping"), ("queue", "pings"))
        wobbly = (("kind", "wobbly"), ("queue", "pings"))
        assert samples[("wai_jobs_completed_total", pings)] == 7
        assert samples[("wai_jobs_claimed_total", pings)] == 7
        assert samples[("wai_jobs_claimed_total", wobbly)] == 4
        assert samples[("wai_jobs_retried_total", wobbly)] == 2
        assert ("wai_jobs_inserted_total", pings) not in samples  # inserted by another process
        completed = tuple(sorted((*pings, ("outcome", "completed"))))
        count = samples[("wai_job_duration_seconds_count", completed)]
        assert count == 7
        assert samples[("wai_job_pickup_latency_seconds_count", pings)] == 7
        assert samples[("wai_pool_size", ())] >= 1
        assert samples[("wai_worker_in_flight", (("queue", "pings"),))] == 0
        assert any(name == "wai_leader" for name, _ in samples)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0, _read(log)
    assert f"metrics and probes on http://127.0.0.1:{port}/metrics" in _read(log)


async def test_each_process_serves_its_own_port(
    database_url: str, aclient: wai.AsyncClient, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text(APP)
    port = free_ports(2)
    log = tmp_path / "worker.log"
    options = ("--processes", "2", "--metrics-port", str(port), "--metrics-host", "127.0.0.1")
    async with (
        worker(database_url, tmp_path, log, *options) as proc,
        httpx.AsyncClient(timeout=10) as http,
    ):
        leaders: list[str] = []
        for p in (port, port + 1):
            await answering(http, f"http://127.0.0.1:{p}", proc, log)
            text = (await http.get(f"http://127.0.0.1:{p}/metrics")).text
            leaders += [
                dict(labels)["instance_id"]
                for (name, labels), _ in scrape(text).items()
                if name == "wai_leader"
            ]
        assert len(set(leaders)) == 2  # two processes, two instance ids
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0, _read(log)


def test_a_metrics_port_in_use_is_refused_before_anything_starts(
    database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text(APP)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_wai(
            "--database-url", database_url, "worker", "app:client",
            "--metrics-port", str(port), "--metrics-host", "127.0.0.1",
            cwd=tmp_path,
        )  # fmt: skip
    assert result.returncode != 0
    assert "already in use" in result.stderr
    assert "--metrics-port" in result.stderr
    assert "Traceback" not in result.stderr
