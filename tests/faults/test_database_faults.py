"""The database goes away under load: a server restart, and sessions terminated at random.

Every worker loop treats a failed statement as transient: the claim loop backs off and
retries, the finalizer keeps its batch and writes it again (the lease guard drops an
outcome whose first write had in fact committed), heartbeats and maintenance passes
retry on their next interval, the LISTEN session reconnects with backoff and wakes every
queue, and the connection pool replaces broken connections. Whatever a broken session
leaves behind (an attempt claimed but never started, a handler whose own connection
died) is an ordinary ``running`` row that rescue recovers.
"""

from __future__ import annotations

import asyncio
import random

import pytest

import wai
from tests.faults._cluster import PgCluster
from tests.faults._contract import Db, Workers, check_contract, wait_for
from tests.faults._tasks import Mark

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_postgres_restart_mid_drain_workers_reconnect_and_finish(
    pg_cluster: PgCluster, workers: Workers, mode: str
) -> None:
    url = pg_cluster.url("wai_faults")
    db = Db(url)
    await db.install_probes()
    jobs = 5000
    procs = [await workers.spawn_ready(db, url, "work=20", app=f"fault-{name}") for name in "ab"]
    ids = await db.insert(
        wai.EnqueueRequest(Mark(n=i, sleep=0.005), queue="work") for i in range(jobs)
    )

    async def under_way() -> bool:
        return await db.count("state = 'completed'") >= jobs // 10

    await wait_for(under_way, 60, what="the drain to get going", diagnose=workers.output)
    before = await db.count("state = 'completed'")
    await asyncio.to_thread(pg_cluster.restart, mode)
    assert before < jobs  # the restart landed mid-drain

    async def all_done() -> bool:
        return await db.count("state = 'completed'") == jobs

    await wait_for(
        all_done,
        90,
        what="every job to complete after the restart",
        interval=0.3,
        diagnose=lambda: workers.output() + pg_cluster.server_log(),
    )
    await check_contract(db, ids)
    assert all(p.returncode is None for p in procs), workers.output()
    assert [await workers.stop(p) for p in procs] == [0, 0], workers.output()


async def test_sessions_terminated_at_random_workers_recover_and_finish(
    database_url: str, workers: Workers
) -> None:
    db = Db(database_url)
    await db.install_probes()
    jobs = 3000
    apps = ["fault-a", "fault-b"]
    procs = [await workers.spawn_ready(db, database_url, "work=16", app=app) for app in apps]
    ids = await db.insert(
        wai.EnqueueRequest(Mark(n=i, sleep=0.01), queue="work") for i in range(jobs)
    )
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    # wai's own sessions (pool, LISTEN) only: the handlers' side connections are the
    # test's instrumentation, and a job whose handler fails only waits out its backoff
    terminated: list[str] = []
    for _ in range(12):
        await asyncio.sleep(rng.uniform(0.15, 0.25))
        sessions = await db.rows(
            "SELECT pid, application_name FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = ANY(%s)",
            (apps,),
        )
        for pid, app in rng.sample(sessions, min(len(sessions), rng.randint(1, 3))):
            if await db.value("SELECT pg_terminate_backend(%s)", (pid,)):
                terminated.append(app)
    assert len(terminated) >= 6, f"seed {seed}: only {terminated} terminated"

    async def all_done() -> bool:
        return await db.count("state = 'completed'") == jobs

    await wait_for(
        all_done, 60, what=f"every job to complete (seed {seed})", interval=0.3,
        diagnose=workers.output,
    )  # fmt: skip
    await check_contract(db, ids)
    assert all(p.returncode is None for p in procs), workers.output()
    assert [await workers.stop(p) for p in procs] == [0, 0], workers.output()
