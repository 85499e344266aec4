"""Depth samples: the leader's DepthSampler records live counts and lag per queue, the
client reads them back by window and queue, and old samples are forgotten."""

from __future__ import annotations

import pytest

import wai
from tests.integration._helpers import fetch, serving, wait_for
from tests.integration.test_admin import make
from wai.maintenance import DepthSampler

pytestmark = pytest.mark.timeout(60)


async def test_a_sample_holds_the_live_counts_and_lag_of_every_queue(
    aclient: wai.AsyncClient,
) -> None:
    sampler = DepthSampler(aclient.pool, aclient.schema, interval=15)
    assert (await sampler.run_once()).queues == 0  # nothing to sample: no row
    assert await aclient.queue_depth_history() == []

    for state in ("available", "available", "running", "scheduled", "waiting_external"):
        await make(aclient, state, queue="a")
    late = await make(aclient, "available", queue="b")
    await fetch(
        aclient, "UPDATE wai.jobs SET run_at = now() - interval '30 seconds' WHERE id = %s",
        (late.id,),
    )  # fmt: skip
    await make(aclient, "completed", queue="c")  # finished jobs only: no depth
    await aclient.pause_queue("p")  # a paused queue with no job: sampled with zeros

    result = await sampler.run_once()
    assert (result.queues, result.deleted) == (3, 0)
    samples = await aclient.queue_depth_history()
    assert [s.queue for s in samples] == ["a", "b", "p"]
    a, b, p = samples
    assert isinstance(a, wai.QueueDepth)
    assert a.at == b.at == p.at  # one stamp for the whole sample
    assert a.counts == {"scheduled": 1, "available": 2, "running": 1, "retryable": 0,
                        "waiting_external": 1}  # fmt: skip
    assert a.depth == 5
    assert b.counts["available"] == 1
    assert 30 <= b.oldest_available_lag < 120
    assert a.oldest_available_lag < 30
    assert p.depth == 0
    assert [s.queue for s in await aclient.queue_depth_history(queue="b")] == ["b"]

    await sampler.run_once()
    assert len(await aclient.queue_depth_history()) == 6


async def test_the_window_and_the_retention_bound_the_samples(aclient: wai.AsyncClient) -> None:
    await make(aclient, "available", queue="a")
    sampler = DepthSampler(aclient.pool, aclient.schema, interval=15, retention=3600)
    await sampler.run_once()
    # Age the first sample by 90 minutes: out of a one-hour window, inside a two-hour one.
    await fetch(aclient, "UPDATE wai.queue_depth SET at = at - interval '90 minutes'")
    await sampler.run_once()
    assert len(await aclient.queue_depth_history(minutes=60)) == 1
    assert len(await aclient.queue_depth_history(minutes=120)) == 1  # retention: 1 hour
    assert (await sampler.run_once()).deleted == 0
    [(left,)] = await fetch(aclient, "SELECT count(*) FROM wai.queue_depth")
    assert left == 2


@pytest.mark.parametrize("minutes", [0, 1441, -5, 1.5, "60", True, None])
async def test_bad_windows_are_refused(aclient: wai.AsyncClient, minutes: object) -> None:
    with pytest.raises(wai.ValidationError, match="minutes"):
        await aclient.queue_depth_history(minutes=minutes)  # type: ignore[arg-type]


async def test_a_bad_queue_name_is_refused(aclient: wai.AsyncClient) -> None:
    with pytest.raises(wai.ValidationError, match="invalid queue name"):
        await aclient.queue_depth_history(queue="a b")


async def test_the_leader_samples_while_it_runs(aclient: wai.AsyncClient) -> None:
    await make(aclient, "scheduled", queue="later")
    async with serving(aclient, {}, depth_interval=0.1):
        await wait_for(lambda: aclient.queue_depth_history(queue="later"))
    [first, *_] = await aclient.queue_depth_history(queue="later")
    assert first.counts["scheduled"] == 1
