"""Real worker processes against one PostgreSQL: racing claims and SIGKILL mid-job.

The workers run ``tests/integration/proc_worker.py`` (``AsyncClient.run`` with
small timings). A worker is ready once its LISTEN session shows up in
``pg_stat_activity``.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import wai
from tests.integration._helpers import count, fetch, wait_for, wait_job

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

WORKER = Path(__file__).with_name("proc_worker.py")


@dataclass
class Race:
    """Same shape as ``proc_worker.Race``: kind ``race``."""

    n: int


@dataclass
class Nap:
    seconds: float


@dataclass
class Quick:
    n: int = 0


class Workers:
    """Spawns worker processes and makes sure none outlives the test."""

    def __init__(self, url: str, logs: Path) -> None:
        self.url = url
        self.logs = logs
        self.procs: list[asyncio.subprocess.Process] = []

    async def spawn(self, *queues: str, staleness: float = 30) -> asyncio.subprocess.Process:
        log = (self.logs / f"worker-{len(self.procs)}.log").open("wb")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER),
            self.url,
            *queues,
            "--staleness",
            str(staleness),
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
        log.close()
        self.procs.append(proc)
        return proc

    async def stop(self, proc: asyncio.subprocess.Process) -> int:
        proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(proc.wait(), 15)

    def output(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')}"
            for p in sorted(self.logs.glob("worker-*.log"))
        )

    async def close(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.kill()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 10)


@pytest.fixture
async def workers(database_url: str, tmp_path: Path) -> AsyncIterator[Workers]:
    w = Workers(database_url, tmp_path)
    try:
        yield w
    finally:
        await w.close()


async def listeners(client: wai.AsyncClient) -> int:
    """Sessions of this database (other than ours) whose last statement was a LISTEN."""
    rows = await fetch(
        client,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN%%'",
    )
    return int(rows[0][0])


async def _eq(value: Awaitable[Any], expected: Any) -> bool:
    return (await value) == expected


async def leader_pid(client: wai.AsyncClient) -> int | None:
    """The OS pid of the maintenance leader (leader ids are ``host:pid:nonce``)."""
    rows = await fetch(client, "SELECT leader_id FROM wai.leader WHERE expires_at > now()")
    return int(rows[0][0].split(":")[1]) if rows else None


async def test_two_worker_processes_run_every_job_exactly_once(
    aclient: wai.AsyncClient, workers: Workers
) -> None:
    jobs = 3000
    await fetch(aclient, "CREATE TABLE runs (job_id bigint NOT NULL, pid int NOT NULL)")
    procs = [await workers.spawn("race=16"), await workers.spawn("race=16")]
    await wait_for(lambda: _eq(listeners(aclient), 2), 20, what="both workers to LISTEN")

    rows = await aclient.insert_many(
        [wai.EnqueueRequest(Race(n=i), queue="race") for i in range(jobs)]
    )
    assert len(rows) == jobs

    async def all_done() -> bool:
        return await count(aclient, "state = 'completed'") == jobs

    try:
        await wait_for(all_done, 90, interval=0.2, what="all jobs to complete")
    except AssertionError:
        raise AssertionError(workers.output()) from None
    assert [await workers.stop(p) for p in procs] == [0, 0], workers.output()

    total, distinct = (await fetch(aclient, "SELECT count(*), count(DISTINCT job_id) FROM runs"))[0]
    assert (total, distinct) == (jobs, jobs)  # every job ran exactly once
    missing = await fetch(
        aclient,
        "SELECT count(*) FROM wai.jobs j WHERE NOT EXISTS"
        " (SELECT 1 FROM runs r WHERE r.job_id = j.id)",
    )
    assert missing[0][0] == 0
    # each job was claimed once: no attempt was lost or repeated
    assert await count(aclient, "attempt = 1 AND run_lease = 1 AND errors = '[]'") == jobs
    # both processes took part in the race
    pids = {r[0] for r in await fetch(aclient, "SELECT DISTINCT pid FROM runs")}
    assert pids == {p.pid for p in procs}


async def test_sigkill_mid_job_leaves_the_job_running_for_rescue(
    aclient: wai.AsyncClient, workers: Workers
) -> None:
    victim = await workers.spawn("slow=2")
    await wait_for(lambda: _eq(leader_pid(aclient), victim.pid), 20, what="victim to lead")
    # the survivor would not rescue anything within this test, even once rescue exists
    survivor = await workers.spawn("fast=4", staleness=60)
    await wait_for(lambda: _eq(listeners(aclient), 2), 20, what="both workers to LISTEN")

    nap = await aclient.insert(Nap(seconds=60), queue="slow")
    running = await wait_job(aclient, nap.id, "running", timeout=10)
    claimed = running.heartbeat_at
    assert claimed is not None  # the claim sets it
    # a heartbeat after the claim: the victim is alive and working on it
    await wait_job(
        aclient,
        nap.id,
        lambda r: r.heartbeat_at is not None and r.heartbeat_at > claimed,
        timeout=3,
    )

    victim.kill()
    assert await asyncio.wait_for(victim.wait(), 10) == -signal.SIGKILL

    after = await aclient.get_job(nap.id)
    assert after.state == "running"  # nothing lost, nothing finalized
    assert after.run_lease == running.run_lease == 1
    assert after.attempt == 1
    assert after.finalized_at is None
    assert after.errors == ()
    # nobody heartbeats it any more: it will look stale to rescue
    await asyncio.sleep(0.8)  # four heartbeat intervals of the dead worker
    assert (await aclient.get_job(nap.id)).heartbeat_at == after.heartbeat_at

    # the other worker carries on, and takes the maintenance lease over
    quick = await aclient.insert_many(
        [wai.EnqueueRequest(Quick(n=i), queue="fast") for i in range(20)]
    )
    for row in quick:
        await wait_job(aclient, row.id, "completed", timeout=10)
    await wait_for(lambda: _eq(leader_pid(aclient), survivor.pid), 5, what="failover")

    still = await aclient.get_job(nap.id)
    assert still.state == "running"
    assert still.run_lease == running.run_lease
    assert still.heartbeat_at == after.heartbeat_at
    assert await workers.stop(survivor) == 0, workers.output()
