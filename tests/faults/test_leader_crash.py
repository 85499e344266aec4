"""SIGKILL of the maintenance leader: another process takes promotion and rescue over.

The leader holds a lease row (``wai.leader``) that lasts ``2 x election_interval`` and
is renewed every half interval. A killed leader cannot resign, so its lease simply
runs out; the next election attempt of another process with ``maintenance=True``
takes it, and that process starts the promoter and the rescuer.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

import wai
from tests.faults._contract import Db, Workers, check_contract, wait_for
from tests.faults._tasks import Mark
from wai.maintenance import Elector, PeriodicService

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

#: An attempt abandoned long ago: ``running`` under lease 1, heartbeat an hour old.
ABANDON = (
    "UPDATE wai.jobs SET state = 'running', attempt = 1, run_lease = 1,"
    " attempted_at = now() - interval '1 hour', heartbeat_at = now() - interval '1 hour'"
    " WHERE id = %s"
)


async def test_sigkill_leader_another_process_takes_promotion_and_rescue_over(
    database_url: str, workers: Workers
) -> None:
    db = Db(database_url)
    await db.install_probes()
    first = await workers.spawn_ready(db, database_url, "work=8", app="fault-first")
    await wait_for(db.leader_pid, 20, what="a first leader")
    second = await workers.spawn_ready(db, database_url, "work=8", app="fault-second")
    leader_pid, old_id = await wait_for(db.leader, 5, what="the leader")
    victim, survivor = (first, second) if leader_pid == first.pid else (second, first)
    assert leader_pid == victim.pid

    await workers.kill(victim)
    # From here on only the survivor can promote or rescue: jobs due a moment from now,
    # and an attempt that a dead worker left running.
    now = await db.value("SELECT now()")
    due = now.replace(microsecond=0) + timedelta(seconds=2)
    scheduled = await db.insert(
        wai.EnqueueRequest(Mark(n=i), queue="work", run_at=due) for i in range(20)
    )
    # (inserted scheduled, far ahead, so that no worker claims it before it is abandoned)
    later = now + timedelta(hours=1)
    (stale,) = await db.insert([wai.EnqueueRequest(Mark(n=99), queue="work", run_at=later)])
    await db.rows(ABANDON, (stale,))
    assert await db.count("state = 'scheduled'") == len(scheduled)
    assert await db.count("state = 'running'") == 1

    async def survivor_leads() -> tuple[int, str] | None:
        found = await db.leader()
        return found if found and found[0] == survivor.pid else None

    _, new_id = await wait_for(survivor_leads, 20, what="the takeover", diagnose=workers.output)
    assert new_id != old_id
    ids = [*scheduled, stale]

    async def all_done() -> bool:
        return await db.count("state = 'completed'") == len(ids)

    await wait_for(all_done, 40, what="every job to complete", diagnose=workers.output)
    seen = await check_contract(db, ids)

    elected_at = await db.value("SELECT elected_at FROM wai.leader WHERE leader_id = %s", (new_id,))
    for job_id in scheduled:  # promoted by the new leader, run once
        assert seen.finals[job_id] == [(1, "completed")]
        assert seen.runs[job_id] == [(1, survivor.pid)]
    # rescued by the new leader after its election, then run again
    _, attempt, lease, errors = seen.jobs[stale]
    assert (attempt, lease) == (2, 2)
    assert [e.get("rescued") for e in errors] == ["stale_heartbeat"]
    rescued_at = await db.value(
        "SELECT at FROM finalizations WHERE job_id = %s AND run_lease = 1", (stale,)
    )
    assert rescued_at >= elected_at
    assert seen.finals[stale] == [(1, "retryable"), (2, "completed")]
    assert seen.runs[stale] == [(2, survivor.pid)]  # lease 1 never ran a handler
    assert await workers.stop(survivor) == 0, workers.output()


class _Stubborn(PeriodicService):
    """A service whose loop absorbs its first cancellation and carries on.

    That is what ``asyncio.wait_for`` does on Python 3.11 when a cancel arrives just
    as its result does: psycopg_pool waits for a connection with it, so a service
    cancelled right when the pool hands it a reconnected connection keeps running.
    The worker-process tests above hit it after a server restart under load.
    """

    interval = 0.05

    def __init__(self) -> None:
        self.absorbed = 0

    async def run_once(self) -> None:
        return None

    async def run_forever(self) -> None:
        while True:
            try:
                await asyncio.sleep(self.interval)
            except asyncio.CancelledError:
                if self.absorbed:
                    raise
                self.absorbed += 1


async def test_elector_cancelled_while_a_service_absorbs_its_cancel_still_stops(
    database_url: str,
) -> None:
    db = Db(database_url)
    service = _Stubborn()
    async with wai.AsyncClient(database_url, max_connections=2) as client:
        elector = Elector(client.pool, "wai", interval=0.2, services=lambda: [service])
        task = asyncio.create_task(elector.run_forever())
        try:
            await wait_for(lambda: _true(elector.is_leader), 10, what="leadership")
            # another process takes the lease: the elector stops its services, and the
            # service absorbs that cancel; shutdown comes while the elector waits for it
            await db.rows(
                "UPDATE wai.leader SET leader_id = 'elsewhere:1:x',"
                " expires_at = now() + interval '1 hour'"
            )
            await wait_for(lambda: _true(service.absorbed == 1), 10, what="the absorbed cancel")
            task.cancel()
            # the elector must end (it used to swallow this cancellation and run forever)
            done, _ = await asyncio.wait({task}, timeout=20)
            assert done, "the elector did not stop"
            assert task.cancelled()
        finally:
            if not task.done():
                task.cancel()
                service.absorbed = 1
                await asyncio.wait({task}, timeout=5)


async def _true(value: bool) -> bool:
    return value
