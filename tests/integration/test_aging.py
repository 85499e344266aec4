"""Priority aging on a real PostgreSQL: long-waiting available jobs move up, once per interval."""

from __future__ import annotations

from typing import Any

import pytest

import wai
from tests.integration._helpers import Work, fetch, serving, wait_for
from wai.maintenance import Aging, AgingResult

pytestmark = pytest.mark.timeout(60)

ORIGINAL = "wai.original_priority"


async def _job(
    client: wai.AsyncClient,
    *,
    waited: float,
    priority: int = 4,
    queue: str = "aging",
    state: str = "available",
    metadata: dict[str, Any] | None = None,
) -> int:
    """A job in ``state`` whose ``run_at`` is ``waited`` seconds ago."""
    row = await client.insert(Work(), queue=queue, priority=priority, metadata=metadata)
    await fetch(
        client,
        "UPDATE wai.jobs SET state = %s::wai.job_state,"
        " run_at = now() - make_interval(secs => %s) WHERE id = %s",
        (state, waited, row.id),
    )
    return row.id


async def _set_aging(client: wai.AsyncClient, queue: str, seconds: float) -> None:
    await fetch(
        client,
        "INSERT INTO wai.queues (name, priority_aging) VALUES (%s, make_interval(secs => %s))",
        (queue, seconds),
    )


async def _priority(client: wai.AsyncClient, job_id: int) -> tuple[int, dict[str, Any]]:
    row = await client.get_job(job_id)
    return row.priority, row.metadata


async def _wait_more(client: wai.AsyncClient, job_id: int, seconds: float) -> None:
    await fetch(
        client,
        "UPDATE wai.jobs SET run_at = run_at - make_interval(secs => %s) WHERE id = %s",
        (seconds, job_id),
    )


async def test_aging_raises_priority_once_per_interval_and_records_the_original(
    aclient: wai.AsyncClient,
) -> None:
    await _set_aging(aclient, "aging", 60)
    one = await _job(aclient, waited=90, priority=3, metadata={"keep": "me"})  # 1 interval
    two = await _job(aclient, waited=150, priority=4)  # 2 intervals at once
    fresh = await _job(aclient, waited=30, priority=4)  # not yet
    top = await _job(aclient, waited=600, priority=1)  # already most urgent
    floor = await _job(aclient, waited=6000, priority=2)  # never below 1
    aging = Aging(aclient.pool, aclient.schema, interval=1)

    assert await aging.run_once() == AgingResult({"aging": 3})
    assert await _priority(aclient, one) == (2, {"keep": "me", ORIGINAL: 3})
    assert await _priority(aclient, two) == (2, {ORIGINAL: 4})
    assert await _priority(aclient, fresh) == (4, {})
    assert await _priority(aclient, top) == (1, {})
    assert await _priority(aclient, floor) == (1, {ORIGINAL: 2})

    # within the same interval, another pass changes nothing
    assert await aging.run_once() == AgingResult({})
    assert await _priority(aclient, one) == (2, {"keep": "me", ORIGINAL: 3})

    # one more interval of waiting: one more step, and the original is kept
    await _wait_more(aclient, one, 60)
    assert await aging.run_once() == AgingResult({"aging": 1})
    assert await _priority(aclient, one) == (1, {"keep": "me", ORIGINAL: 3})


async def test_aging_touches_only_available_jobs_of_aging_queues(
    aclient: wai.AsyncClient,
) -> None:
    await _set_aging(aclient, "aging", 10)
    await fetch(aclient, "INSERT INTO wai.queues (name) VALUES ('plain')")  # no aging set
    untouched = [
        await _job(aclient, waited=3600, queue="plain"),
        await _job(aclient, waited=3600, queue="nowhere"),  # no queues row at all
    ]
    untouched += [
        await _job(aclient, waited=3600, state=state)
        for state in ("scheduled", "running", "retryable", "waiting_external", "completed")
    ]
    aged = await _job(aclient, waited=3600)

    result = await Aging(aclient.pool, aclient.schema, interval=1).run_once()

    assert result.aged == {"aging": 1}
    assert (await aclient.get_job(aged)).priority == 1
    for job_id in untouched:
        assert await _priority(aclient, job_id) == (4, {}), job_id


@pytest.mark.parametrize(
    ("stored", "original"), [(1e10, 4), (-1e10, 1), (2.6, 3), ("3", 4), ([1], 4)]
)
async def test_a_hostile_original_priority_costs_nothing_but_itself(
    aclient: wai.AsyncClient, stored: Any, original: int
) -> None:
    # user metadata may hold anything under the key: a number is clamped to 1..4, anything
    # else ignored (the job's own priority counts), and the pass still ages its neighbours
    await _set_aging(aclient, "aging", 60)
    hostile = await _job(aclient, waited=90, priority=4, metadata={ORIGINAL: stored})
    neighbour = await _job(aclient, waited=90, priority=4)
    assert await Aging(aclient.pool, aclient.schema, interval=1).run_once() == AgingResult(
        {"aging": 2}
    )
    assert (await aclient.get_job(hostile)).priority == max(1, original - 1)
    assert await _priority(aclient, neighbour) == (3, {ORIGINAL: 4})


async def test_aging_works_in_batches(aclient: wai.AsyncClient) -> None:
    await _set_aging(aclient, "aging", 10)
    ids = [await _job(aclient, waited=15) for _ in range(7)]
    result = await Aging(aclient.pool, aclient.schema, interval=1, batch_size=2).run_once()
    assert result.aged == {"aging": 7}
    assert {(await aclient.get_job(i)).priority for i in ids} == {3}


async def test_queue_config_priority_aging_is_stored_and_applied_by_the_leader(
    aclient: wai.AsyncClient,
) -> None:
    queues = {"aging": wai.QueueConfig(concurrency=1, priority_aging=10)}
    async with serving(aclient, queues):
        pass  # starting stores the queue's settings
    rows = await fetch(
        aclient,
        "SELECT extract(epoch FROM priority_aging)::float8, completed_retention"
        " FROM wai.queues WHERE name = 'aging'",
    )
    assert rows == [(10.0, None)]

    # a maintenance-only process claims nothing: the job waits, and ages
    job = await _job(aclient, waited=25, priority=4)
    async with serving(aclient, {}, aging_interval=0.1):

        async def aged() -> bool:
            return (await aclient.get_job(job)).priority == 2

        await wait_for(aged, 10, what="the leader's aging pass")
    assert (await aclient.get_job(job)).state == "available"
