"""``client.health()`` on a real PostgreSQL: the database, the schema and the worker runtime.

The server going away and coming back is in ``tests/faults/test_health_outage.py`` (on a
throwaway cluster); here the database is the shared server's, and an unreachable one is a
port nothing listens on.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

import wai
from tests.integration._helpers import FAST, Work, register, serving, wait_for, wait_gate
from wai._migrate import migrations
from wai.errors import ValidationError
from wai.worker import Runtime

pytestmark = pytest.mark.timeout(60)

ALL = tuple(m.version for m in migrations())


def runtime_of(client: wai.AsyncClient) -> Runtime:
    runtime = client._runtime  # pyright: ignore[reportPrivateUsage]
    assert runtime is not None
    return runtime


def unused_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def forget_migrations(url: str, versions: tuple[int, ...], schema: str = "wai") -> None:
    """Remove ``versions`` from the ledger: the schema of an older wai, as far as it can tell."""
    query = sql.SQL("DELETE FROM {}.migrations WHERE version = ANY(%s)").format(
        sql.Identifier(schema)
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(query, (list(versions),))


# -- the database and the schema ------------------------------------------------------


async def test_healthy_client_is_ready_and_live(aclient: wai.AsyncClient) -> None:
    health = await aclient.health()
    assert health.ready
    assert health.live
    assert health.database
    assert health.schema_current
    assert health.pending_migrations == ()
    assert health.runtime is None
    assert health.problems == ()
    assert health.checked_at.utcoffset() == timedelta(0)
    assert 0 < health.latency < 2


def test_healthy_sync_client_is_ready(sclient: wai.Client) -> None:
    health = sclient.health()
    assert (health.ready, health.live, health.database, health.problems) == (True, True, True, ())
    assert health.runtime is None


async def test_unmigrated_database_is_not_ready(empty_database_url: str) -> None:
    async with wai.AsyncClient(empty_database_url) as client:
        health = await client.health()
    assert health.database
    assert not health.schema_current
    assert not health.ready
    assert health.live  # a migration is the cure, not a restart
    assert health.pending_migrations == ALL
    assert health.problems == (f"schema 'wai' lacks migrations {list(ALL)}",)


@pytest.mark.parametrize("flavor", ["async", "sync"])
async def test_partly_migrated_schema_lists_what_it_lacks(
    empty_database_url: str, flavor: str
) -> None:
    with wai.Client(empty_database_url) as admin:
        admin.migrate()
    missing = ALL[-2:]
    forget_migrations(empty_database_url, missing)
    if flavor == "async":
        async with wai.AsyncClient(empty_database_url) as client:
            health = await client.health()
    else:
        with wai.Client(empty_database_url) as sync_client:
            health = await asyncio.to_thread(sync_client.health)
    assert health.pending_migrations == missing
    assert not health.ready
    assert health.problems == (f"schema 'wai' lacks migrations {list(missing)}",)


async def test_other_schema_of_a_migrated_database_is_not_ready(database_url: str) -> None:
    async with wai.AsyncClient(database_url, schema="elsewhere") as client:
        health = await client.health()
    assert health.database
    assert health.pending_migrations == ALL
    assert "schema 'elsewhere' lacks migrations" in health.problems[0]


@pytest.mark.parametrize("flavor", ["async", "sync"])
async def test_unreachable_database_is_reported_not_raised(flavor: str) -> None:
    url = f"postgresql://postgres@127.0.0.1:{unused_port()}/nothing"
    if flavor == "async":
        health = await wai.AsyncClient(url).health(timeout=3)
    else:
        health = await asyncio.to_thread(wai.Client(url).health, 3)
    assert not health.database
    assert not health.schema_current
    assert not health.ready
    assert health.live
    assert health.pending_migrations == ()
    assert len(health.problems) == 1
    assert health.problems[0].startswith("database unreachable: ")
    assert "refused" in health.problems[0].lower()


async def test_missing_database_is_unreachable_and_says_so(database_url: str) -> None:
    url = database_url.rsplit("/", 1)[0] + "/wai_no_such_database"
    health = await wai.AsyncClient(url).health()
    assert not health.database
    assert 'database "wai_no_such_database" does not exist' in health.problems[0]


async def test_client_not_opened_checks_without_opening_its_pool(database_url: str) -> None:
    client = wai.AsyncClient(database_url)
    health = await client.health()
    assert health.ready
    assert client.pool.closed  # the check used a connection of its own
    await client.close()


async def test_pool_busy_with_work_is_still_ready(database_url: str) -> None:
    # Every pooled connection is held (say, by jobs): the check opens one of its own.
    async with (
        wai.AsyncClient(database_url, max_connections=1) as client,
        client.pool.connection() as held,
        held.transaction(),
    ):
        await held.execute("SELECT 1")
        health = await client.health(timeout=2)
        assert health.ready, health.problems


def test_sync_pool_busy_with_work_is_still_ready(database_url: str) -> None:
    with (
        wai.Client(database_url, max_connections=1) as client,
        client.pool.connection() as held,
    ):
        held.execute("SELECT 1")
        health = client.health(timeout=2)
        assert health.ready, health.problems


async def test_pooled_connection_killed_is_no_outage(aclient: wai.AsyncClient) -> None:
    # The server ended the pool's session (a restart, a failover): the next check must not
    # call the database unreachable because of the dead connection it was handed.
    async with aclient.pool.connection() as conn:
        cur = await conn.execute("SELECT pg_backend_pid()")
        row = await cur.fetchone()
        assert row is not None
        pid = row[0]
    with psycopg.connect(aclient.database_url, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))
    health = await aclient.health()
    assert health.ready, health.problems


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf")])
async def test_timeout_is_checked(aclient: wai.AsyncClient, bad: float) -> None:
    with pytest.raises(ValidationError, match="timeout"):
        await aclient.health(timeout=bad)


# -- the worker runtime -----------------------------------------------------------------


async def test_runtime_with_queues_reports_its_claimers_and_leadership(
    aclient: wai.AsyncClient,
) -> None:
    gate = threading.Event()

    async def body(job: wai.Job[Work]) -> None:
        await wait_gate(gate)

    aclient.task(Work, queue="emails")(body)
    async with serving(aclient, {"emails": 2, "reports": 1}):

        async def leading() -> wai.Health | None:
            health = await aclient.health()
            return health if health.runtime and health.runtime.leader else None

        health = await wait_for(leading, 10, what="leadership")
        assert health.ready, health.problems
        assert health.live
        runtime = health.runtime
        assert runtime is not None
        assert runtime.instance_id == runtime_of(aclient).instance_id
        assert runtime.running
        assert not runtime.stopping
        assert dict(runtime.claimers) == {"emails": True, "reports": True}
        assert set(runtime.background) >= {
            "hooks",
            "finalizer",
            "heartbeat",
            "notifier",
            "records",
            "throughput",
            "elector",
            "loop_lag",
        }
        assert all(runtime.background.values())
        assert runtime.in_flight == 0
        assert runtime.loop_lag < 5

        row = await aclient.insert(Work(n=1))

        async def in_flight() -> bool:
            rt = (await aclient.health()).runtime
            return rt is not None and rt.in_flight == 1

        await wait_for(in_flight, 10, what="the job to be in flight")
        listening = await wait_for(
            lambda: runtime_of(aclient).health().listening, 10, what="LISTEN"
        )
        assert listening is True
        gate.set()
        await wait_for(lambda: not runtime_of(aclient).attempts, 10, what="the outcome")
        assert (await aclient.get_job(row.id)).state == "completed"
    # Shut down: no runtime runs in the client any more.
    after = await aclient.health()
    assert after.runtime is None
    assert after.ready


async def test_runtime_without_maintenance_is_never_leader(aclient: wai.AsyncClient) -> None:
    register(aclient, "async", lambda job: None)
    async with serving(aclient, {"q": 1}, maintenance=False):
        health = await aclient.health()
        assert health.ready, health.problems
        assert health.runtime is not None
        assert not health.runtime.leader
        assert "elector" not in health.runtime.background


async def test_maintenance_only_runtime_has_no_claimers(aclient: wai.AsyncClient) -> None:
    async with serving(aclient, {}):
        health = await wait_for(
            lambda: _leader_health(aclient), 10, what="leadership of a maintenance-only runtime"
        )
        assert health.ready, health.problems
        assert health.runtime is not None
        assert dict(health.runtime.claimers) == {}
        assert health.runtime.listening is None


async def _leader_health(client: wai.AsyncClient) -> wai.Health | None:
    health = await client.health()
    return health if health.runtime is not None and health.runtime.leader else None


async def test_dead_claimer_makes_the_process_unready_and_not_live(
    aclient: wai.AsyncClient,
) -> None:
    async with serving(aclient, {"emails": 1, "reports": 1}):
        assert (await aclient.health()).ready
        task = runtime_of(aclient)._producer_tasks["emails"]  # pyright: ignore[reportPrivateUsage]
        task.cancel()
        await asyncio.wait({task})
        health = await aclient.health()
        assert not health.ready
        assert not health.live
        assert health.database  # the database is fine: the claimer is the problem
        assert health.runtime is not None
        assert dict(health.runtime.claimers) == {"emails": False, "reports": True}
        assert health.problems == ("queue 'emails' claimer stopped",)


async def test_dead_background_loop_is_named(aclient: wai.AsyncClient) -> None:
    async with serving(aclient, {"q": 1}):
        task = runtime_of(aclient)._background["heartbeat"]  # pyright: ignore[reportPrivateUsage]
        task.cancel()
        await asyncio.wait({task})
        health = await aclient.health()
        assert not health.ready
        assert not health.live
        assert health.problems == ("background loop 'heartbeat' stopped",)


async def test_shutting_down_is_unready_but_live(aclient: wai.AsyncClient) -> None:
    gate = threading.Event()

    async def body(job: wai.Job[Work]) -> None:
        await wait_gate(gate)

    aclient.task(Work, queue="q")(body)
    await aclient.start({"q": 1}, **FAST)
    try:
        await aclient.insert(Work())
        await wait_for(lambda: runtime_of(aclient).attempts, 10, what="a running attempt")
        stopping = asyncio.create_task(aclient.shutdown(timeout=10))
        await wait_for(lambda: runtime_of(aclient).stopping, 5, what="shutdown to begin")
        health = await aclient.health()
        assert not health.ready
        assert health.live
        assert health.problems == ("worker runtime is shutting down",)
        assert health.runtime is not None
        assert health.runtime.stopping
        assert not health.runtime.running
        gate.set()
        await stopping
    finally:
        gate.set()
        await aclient.shutdown()
    assert (await aclient.health()).runtime is None


async def test_blocked_event_loop_shows_as_loop_lag(aclient: wai.AsyncClient) -> None:
    async with serving(aclient, {"q": 1}):
        # Let the lag monitor tick once, then block the loop for 1.2 s: whichever tick
        # was due meanwhile runs at least 0.7 s late (the monitor ticks every 0.5 s).
        await asyncio.sleep(0.6)
        time.sleep(1.2)  # noqa: ASYNC251 - blocks the event loop on purpose
        health = await aclient.health()
        assert health.runtime is not None
        assert health.runtime.loop_lag >= 0.7
        assert health.live  # under the limit
