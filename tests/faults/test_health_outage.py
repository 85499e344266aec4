"""``client.health()`` while the database goes away, hangs, and comes back.

On a throwaway cluster (``pg_cluster``): the server stopped with ``pg_ctl stop -m
immediate`` and started again, and the server frozen with SIGSTOP (it accepts bytes and
never answers). Each time both clients must answer within their timeout, reporting the
outage rather than raising, stay live (restarting a worker does not bring a database
back), and be ready again once the server is, on the same pool.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

import wai
from tests.faults._cluster import PgCluster
from tests.faults._contract import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

FAST = {
    "poll_interval": 0.1,
    "heartbeat_interval": 0.2,
    "heartbeat_staleness": 5.0,
    "election_interval": 0.2,
}


@dataclass
class Ping:
    n: int = 0


async def ready(client: wai.AsyncClient) -> wai.Health | None:
    health = await client.health()
    return health if health.ready else None


async def sync_ready(client: wai.Client) -> wai.Health | None:
    health = await asyncio.to_thread(client.health)
    return health if health.ready else None


def server_pids(cluster: PgCluster) -> list[int]:
    """The postmaster and every process it started."""
    postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[1]) == postmaster:
            children.append(int(stat.parent.name))
    return [postmaster, *children]


@contextmanager
def frozen(cluster: PgCluster) -> Iterator[None]:
    """The whole server stopped in its tracks (SIGSTOP), resumed on exit."""
    pids = server_pids(cluster)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


async def timed(
    call: asyncio.Future[wai.Health] | asyncio.Task[wai.Health],
) -> tuple[wai.Health, float]:
    began = time.monotonic()
    health = await call
    return health, time.monotonic() - began


async def test_server_stopped_then_started_health_follows(pg_cluster: PgCluster) -> None:
    url = pg_cluster.url("wai_faults")
    done: list[int] = []
    async with wai.AsyncClient(url) as client:

        async def ping(job: wai.Job[Ping]) -> None:
            done.append(job.args.n)

        client.task(Ping, queue="pings")(ping)
        sync_client = wai.Client(url)
        sync_client.open()
        try:
            await client.start({"pings": 2}, **FAST)
            health = await wait_for(lambda: ready(client), 20, what="ready at first")
            assert health.runtime is not None
            assert dict(health.runtime.claimers) == {"pings": True}
            assert await wait_for(lambda: sync_ready(sync_client), 20, what="sync ready")

            await asyncio.to_thread(pg_cluster.stop)  # pg_ctl stop -m immediate

            health, took = await timed(asyncio.ensure_future(client.health(timeout=2.0)))
            assert took < 3.0
            assert not health.database
            assert not health.ready
            assert not health.schema_current
            assert health.live  # the runtime's loops retry: no reason to restart the process
            assert health.runtime is not None
            assert dict(health.runtime.claimers) == {"pings": True}
            assert len(health.problems) == 1, health.problems
            assert health.problems[0].startswith("database unreachable: ")

            sync_health, took = await timed(
                asyncio.ensure_future(asyncio.to_thread(sync_client.health, 2.0))
            )
            assert took < 3.0
            assert not sync_health.database
            assert not sync_health.ready
            assert sync_health.live
            assert sync_health.problems[0].startswith("database unreachable: ")

            await asyncio.to_thread(pg_cluster.start)

            health = await wait_for(lambda: ready(client), 30, what="ready after the restart")
            assert health.database
            assert health.problems == ()
            assert await wait_for(lambda: sync_ready(sync_client), 30, what="sync ready again")
            # The pools recovered: both clients work as before, and so do the workers.
            row = await client.insert(Ping(n=1))
            await asyncio.to_thread(sync_client.insert, Ping(n=2))

            async def both_ran() -> bool:
                return sorted(done) == [1, 2]

            await wait_for(both_ran, 30, what="the jobs inserted after the restart")
            assert (await client.get_job(row.id)).state in ("running", "completed")
        finally:
            await client.shutdown()
            sync_client.close()


async def test_frozen_server_health_answers_within_its_timeout(pg_cluster: PgCluster) -> None:
    url = pg_cluster.url("wai_faults")
    async with wai.AsyncClient(url) as client:
        sync_client = wai.Client(url)
        sync_client.open()
        try:
            assert await wait_for(lambda: ready(client), 20, what="ready at first")
            assert await wait_for(lambda: sync_ready(sync_client), 20, what="sync ready")
            with frozen(pg_cluster):
                # The pooled connection's query never gets an answer: the check is left to
                # end on its own, and the caller hears back at the timeout.
                health, took = await timed(asyncio.ensure_future(client.health(timeout=1.0)))
                assert took < 2.0
                assert not health.database
                assert not health.ready
                assert health.live
                assert health.problems == ("database unreachable: no answer within 1 s",)
                assert health.latency >= 1.0

                sync_health, took = await timed(
                    asyncio.ensure_future(asyncio.to_thread(sync_client.health, 1.0))
                )
                assert took < 2.0
                assert sync_health.problems == ("database unreachable: no answer within 1 s",)
            health = await wait_for(lambda: ready(client), 30, what="ready once it thaws")
            assert health.problems == ()
            assert await wait_for(lambda: sync_ready(sync_client), 30, what="sync ready again")
        finally:
            sync_client.close()


async def test_the_probe_server_turns_unready_while_the_server_is_down(
    pg_cluster: PgCluster,
) -> None:
    """``wai worker --metrics-port``'s server (uvicorn, a real socket): /readyz 503 with
    the problem while PostgreSQL is stopped, 200 again once it is back; /healthz and
    /metrics answer 200 throughout."""
    import httpx

    from wai._http_server import listening_socket
    from wai.web._probes import ProbeServer

    url = pg_cluster.url("wai_faults")
    async with wai.AsyncClient(url) as client:

        async def ping(job: wai.Job[Ping]) -> None:
            return None

        client.task(Ping, queue="pings")(ping)
        sock = listening_socket("127.0.0.1", 0)
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        server = ProbeServer(client, sock)
        server.start()
        try:
            await client.start({"pings": 2}, **FAST)
            async with httpx.AsyncClient(base_url=base, timeout=10) as http:

                async def status(path: str, code: int) -> httpx.Response | None:
                    response = await http.get(path)
                    return response if response.status_code == code else None

                ok = await wait_for(lambda: status("/readyz", 200), 20, what="/readyz 200")
                assert ok.json()["runtime"]["claimers"] == {"pings": True}

                await asyncio.to_thread(pg_cluster.stop)

                down = await wait_for(lambda: status("/readyz", 503), 10, what="/readyz 503")
                body = down.json()
                assert (body["ready"], body["live"], body["database"]) == (False, True, False)
                assert body["problems"][0].startswith("database unreachable: ")
                assert (await http.get("/healthz")).status_code == 200
                scrape = await http.get("/metrics")
                assert scrape.status_code == 200
                assert "wai_jobs_claimed_total" in scrape.text

                await asyncio.to_thread(pg_cluster.start)

                back = await wait_for(lambda: status("/readyz", 200), 30, what="/readyz 200 again")
                assert back.json()["problems"] == []
        finally:
            await client.shutdown()
            await server.stop()
