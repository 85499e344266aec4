"""Runtime records on a real PostgreSQL: each process's row, its refresh, removal and collection."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from datetime import timedelta

import pytest

import wai
from tests.integration._helpers import (
    Work,
    db_now,
    fetch,
    register,
    runtime_of,
    serving,
    wait_for,
    wait_gate,
    wait_job,
)
from wai.maintenance import InstanceReaper

pytestmark = pytest.mark.timeout(60)


async def _only(client: wai.AsyncClient) -> wai.RuntimeInstance:
    instances = await client.list_runtime_instances()
    assert len(instances) == 1, instances
    return instances[0]


async def _insert_record(
    client: wai.AsyncClient, instance_id: str, *, seen_ago: float, health: str = "{}"
) -> None:
    await fetch(
        client,
        "INSERT INTO wai.runtime_instances"
        " (instance_id, hostname, pid, version, role, health, started_at, last_seen_at)"
        " VALUES (%s, 'gone-host', 4242, '0.0.1', 'worker', %s::jsonb,"
        " now() - make_interval(secs => %s), now() - make_interval(secs => %s))",
        (instance_id, health, seen_ago, seen_ago),
    )


async def _instance_ids(client: wai.AsyncClient) -> set[str]:
    return {i.instance_id for i in await client.list_runtime_instances()}


async def test_worker_record_has_its_fields_and_vanishes_on_shutdown(
    aclient: wai.AsyncClient,
) -> None:
    register(aclient, "async", lambda job: None)
    before = await db_now(aclient)
    async with serving(aclient, {"q": 3, "other": 2}, record_interval=0.1):
        runtime = runtime_of(aclient)
        record = await _only(aclient)  # written before start() returned
        assert record.instance_id == runtime.instance_id
        host, pid, _suffix = record.instance_id.split(":")
        assert (host, int(pid)) == (socket.gethostname(), os.getpid())
        assert record.hostname == socket.gethostname()
        assert record.pid == os.getpid()
        assert record.version == wai.__version__
        assert record.role == "worker+maintenance"
        assert record.queues == {"q": 3, "other": 2}
        assert record.concurrency == 5
        assert record.in_flight == 0
        assert record.healthy is True
        assert record.health["listen"] is True
        assert record.health["stopping"] is False
        assert record.health["claim_failing"] is False
        assert record.health["record_interval"] == 0.1
        assert before <= record.started_at <= record.last_seen_at

        async def leading() -> wai.RuntimeInstance | None:
            rec = await _only(aclient)
            return rec if rec.leader else None

        led = await wait_for(leading, 5, what="the record's leader flag")
        # the lease row and the record name the same process
        assert await fetch(aclient, "SELECT leader_id FROM wai.leader") == [(runtime.instance_id,)]

        async def refreshed() -> wai.RuntimeInstance | None:
            rec = await _only(aclient)
            return rec if rec.last_seen_at > record.last_seen_at else None

        later = await wait_for(refreshed, 5, what="a refresh of the record")
        assert later.started_at == record.started_at
        assert later.health["last_claim_age"] is not None
        assert later.health["last_claim_age"] < 5
        assert led.instance_id == later.instance_id

    assert await aclient.list_runtime_instances() == []


async def test_record_counts_attempts_in_flight(aclient: wai.AsyncClient) -> None:
    gate = threading.Event()

    @aclient.task(Work, queue="q")
    async def blocked(job: wai.Job[Work]) -> None:
        await wait_gate(gate)

    async with serving(aclient, {"q": 4}, record_interval=0.1):
        rows = [await aclient.insert(Work(n=i)) for i in range(2)]

        async def two_in_flight() -> bool:
            return (await _only(aclient)).in_flight == 2

        await wait_for(two_in_flight, 5, what="in_flight == 2")
        gate.set()
        for row in rows:
            await wait_job(aclient, row.id, "completed")

        async def none_in_flight() -> bool:
            return (await _only(aclient)).in_flight == 0

        await wait_for(none_in_flight, 5, what="in_flight back to 0")


async def test_worker_without_maintenance_records_its_role(aclient: wai.AsyncClient) -> None:
    async with serving(aclient, {"q": 1}, maintenance=False, record_interval=0.1):
        await asyncio.sleep(0.3)
        record = await _only(aclient)
        assert record.role == "worker"
        assert record.leader is False
    assert await aclient.list_runtime_instances() == []


async def test_maintenance_only_runtime_records_its_role_and_leads(
    aclient: wai.AsyncClient,
) -> None:
    async with serving(aclient, {}, record_interval=0.1):
        # it claims nothing, but listens for what wakes promotion and cron: not for health
        assert runtime_of(aclient).notifier is not None

        async def leading() -> wai.RuntimeInstance | None:
            rec = await _only(aclient)
            return rec if rec.leader else None

        record = await wait_for(leading, 5, what="the maintenance process to lead")
        assert record.role == "maintenance"
        assert record.queues == {}
        assert record.concurrency == 0
        assert record.healthy is True
        assert record.health["listen"] is None
    assert await aclient.list_runtime_instances() == []


async def test_start_without_queues_needs_maintenance(aclient: wai.AsyncClient) -> None:
    with pytest.raises(wai.ValidationError, match="nothing to run"):
        await aclient.start({}, maintenance=False)
    assert await aclient.list_runtime_instances() == []


async def test_two_runtimes_record_one_leader(database_url: str) -> None:
    async with (
        wai.AsyncClient(database_url) as one,
        wai.AsyncClient(database_url) as two,
        serving(one, {"q": 1}, record_interval=0.1),
        serving(two, {"q": 1}, record_interval=0.1),
    ):

        async def settled() -> list[wai.RuntimeInstance] | None:
            records = await one.list_runtime_instances()
            leaders = [r for r in records if r.leader]
            return records if len(records) == 2 and len(leaders) == 1 else None

        records = await wait_for(settled, 10, what="two records, one leader")
        assert {r.instance_id for r in records} == {
            runtime_of(one).instance_id,
            runtime_of(two).instance_id,
        }


async def test_leader_collects_records_of_dead_processes(aclient: wai.AsyncClient) -> None:
    await _insert_record(aclient, "dead:1:aaaa", seen_ago=3600)
    await _insert_record(aclient, "recent:2:bbbb", seen_ago=10)  # under the 30 s minimum
    # refreshed 45 s ago but records every 60 s: judged by its own 3 x 60 s
    await _insert_record(aclient, "slow:3:cccc", seen_ago=45, health='{"record_interval": 60}')
    await _insert_record(aclient, "junk:4:dddd", seen_ago=45, health='{"record_interval": "x"}')

    async with serving(aclient, {"q": 1}, record_interval=0.1):
        mine = runtime_of(aclient).instance_id

        async def collected() -> bool:
            return await _instance_ids(aclient) == {mine, "recent:2:bbbb", "slow:3:cccc"}

        # "junk" has no usable interval: the leader's own (0.1 s) applies, then 30 s minimum
        await wait_for(collected, 10, what="the stale records to be collected")


async def test_instance_reaper_run_once(aclient: wai.AsyncClient) -> None:
    await _insert_record(aclient, "dead:1:aaaa", seen_ago=100)
    await _insert_record(aclient, "alive:2:bbbb", seen_ago=1)
    reaper = InstanceReaper(aclient.pool, aclient.schema, interval=1, record_interval=5)
    assert (await reaper.run_once()).deleted == ["dead:1:aaaa"]
    assert (await reaper.run_once()).deleted == []
    strict = InstanceReaper(aclient.pool, aclient.schema, interval=1, record_interval=0.1)
    assert (await strict.run_once()).deleted == []  # still under min_age
    eager = InstanceReaper(
        aclient.pool, aclient.schema, interval=1, record_interval=0.1, min_age=0.5
    )
    assert (await eager.run_once()).deleted == ["alive:2:bbbb"]


async def test_record_is_recreated_after_being_collected(aclient: wai.AsyncClient) -> None:
    # A process wrongly presumed dead (a long pause) writes its record again.
    async with serving(aclient, {"q": 1}, record_interval=0.1):
        await fetch(aclient, "DELETE FROM wai.runtime_instances")

        async def back() -> bool:
            return await _instance_ids(aclient) == {runtime_of(aclient).instance_id}

        await wait_for(back, 5, what="the record to come back")


def test_sync_client_lists_runtime_instances(sclient: wai.Client) -> None:
    assert sclient.list_runtime_instances() == []


async def test_record_of_a_stopping_runtime_is_unhealthy(aclient: wai.AsyncClient) -> None:
    async with serving(aclient, {"q": 1}, record_interval=60):
        runtime = runtime_of(aclient)
        snapshot = runtime.recorder.snapshot()
        assert snapshot["healthy"] is True
        runtime._stopping.set()  # pyright: ignore[reportPrivateUsage]
        snapshot = runtime.recorder.snapshot()
        assert snapshot["healthy"] is False
        assert snapshot["health"]["stopping"] is True


async def test_last_seen_moves_with_the_database_clock(aclient: wai.AsyncClient) -> None:
    async with serving(aclient, {"q": 1}, record_interval=0.1):
        first = await _only(aclient)
        now = await db_now(aclient)
        assert now - first.last_seen_at < timedelta(seconds=5)

        async def refreshed() -> bool:
            return (await _only(aclient)).last_seen_at > now

        await wait_for(refreshed, 5, what="a refresh")
