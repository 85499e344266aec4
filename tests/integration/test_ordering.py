"""Per-key serial execution: jobs sharing an ordering_key run one at a time, in insert order.

In one process with several slots (the real-process races are in test_flow_processes.py):
what holds a key's turn (a retry, by default; a snooze; a wait for a callback) and what
gives it up (completion, failure, the dead-letter queue, cancellation).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from typing import Any

import pytest

import wai
from tests.integration._helpers import fetch, serving, wait_for, wait_job


@dataclass
class Step:
    key: str
    n: int


@dataclass
class Other:
    n: int


Span = tuple[str, int, float, float]


def overlaps(spans: list[Span]) -> list[tuple[Span, Span]]:
    """Pairs of attempts of one key that ran at the same time."""
    found: list[tuple[Span, Span]] = []
    by_key: dict[str, list[Span]] = {}
    for span in spans:
        by_key.setdefault(span[0], []).append(span)
    for runs in by_key.values():
        runs.sort(key=lambda s: s[2])
        found.extend((a, b) for a, b in itertools.pairwise(runs) if b[2] < a[3])
    return found


async def keys_turns(client: wai.AsyncClient) -> list[tuple[str, str]]:
    return [
        (r[0], r[1]) for r in await fetch(client, "SELECT queue, ordering_key FROM wai.key_turns")
    ]


async def test_jobs_of_one_key_run_one_at_a_time_in_insert_order(aclient: wai.AsyncClient) -> None:
    spans: list[Span] = []

    @aclient.task(Step, queue="q")
    async def step(job: wai.Job[Step]) -> None:
        start = time.monotonic()
        await asyncio.sleep(0.005)
        spans.append((job.args.key, job.args.n, start, time.monotonic()))

    keys = [f"k{i}" for i in range(5)]
    await aclient.insert_many(
        [wai.EnqueueRequest(Step(key=k, n=n), ordering_key=k) for n in range(12) for k in keys]
    )
    async with serving(aclient, {"q": 8}):
        await wait_for(lambda: len(spans) == 60, 30, what="60 jobs")
    assert overlaps(spans) == []
    for k in keys:
        assert [n for key, n, *_ in sorted(spans, key=lambda s: s[2]) if key == k] == list(
            range(12)
        )
    # different keys ran side by side
    ordered = sorted(spans, key=lambda s: s[2])
    assert any(b[2] < a[3] for a, b in itertools.pairwise(ordered))
    assert await keys_turns(aclient) == []


async def test_jobs_without_a_key_are_not_held_back_by_a_busy_key(
    aclient: wai.AsyncClient,
) -> None:
    gate = asyncio.Event()
    others: list[int] = []

    @aclient.task(Step, queue="q")
    async def step(job: wai.Job[Step]) -> None:
        await gate.wait()

    @aclient.task(Other, queue="q")
    async def other(job: wai.Job[Other]) -> None:
        others.append(job.args.n)

    await aclient.insert_many(
        [wai.EnqueueRequest(Step(key="busy", n=n), ordering_key="busy") for n in range(50)]
    )
    await aclient.insert_many([Other(n=n) for n in range(20)])
    async with serving(aclient, {"q": 4}):
        await wait_for(lambda: len(others) == 20, 10, what="the unkeyed jobs")
        # their outcomes written too
        await wait_for(lambda: count_state(aclient, "completed", 20), 10, what="20 completed")
        stats = {s.name: s for s in await aclient.queue_stats()}["q"]
        assert stats.counts["running"] == 1  # one attempt of the busy key, no more
        assert stats.keys_running == 1
        assert stats.waiting_turn == 49
        gate.set()
        await wait_for(
            lambda: count_state(aclient, "completed", 70), 20, what="every job completed"
        )


async def count_state(client: wai.AsyncClient, state: str, n: int) -> bool:
    rows = await fetch(client, "SELECT count(*) FROM wai.jobs WHERE state = %s", (state,))
    return int(rows[0][0]) == n


@pytest.mark.parametrize("holds", [True, False])
async def test_a_retrying_job_holds_its_key_unless_the_queue_says_otherwise(
    aclient: wai.AsyncClient, holds: bool
) -> None:
    events: list[tuple[int, int]] = []  # (n, attempt) as attempts start

    @aclient.task(Step, queue="q")
    async def step(job: wai.Job[Step]) -> wai.RetryAfter | None:
        events.append((job.args.n, job.attempt))
        if job.args.n == 0 and job.attempt == 1:
            return wai.RetryAfter(0.5)
        return None

    first = await aclient.insert(Step(key="k", n=0), ordering_key="k")
    second = await aclient.insert(Step(key="k", n=1), ordering_key="k")
    config = wai.QueueConfig(concurrency=4, retry_holds_key=holds)
    async with serving(aclient, {"q": config}):
        await wait_job(aclient, first.id, "completed", 10)
        await wait_job(aclient, second.id, "completed", 10)
    if holds:
        assert events == [(0, 1), (0, 2), (1, 1)]
    else:
        # the second job ran while the first waited for its retry
        assert events == [(0, 1), (1, 1), (0, 2)]


async def test_a_snoozed_job_keeps_its_turn(aclient: wai.AsyncClient) -> None:
    events: list[tuple[int, int]] = []

    @aclient.task(Step, queue="q")
    async def step(job: wai.Job[Step]) -> wai.Snooze | None:
        events.append((job.args.n, job.run_lease))
        if job.args.n == 0 and job.run_lease == 1:
            return wai.Snooze(0.4)
        return None

    first = await aclient.insert(Step(key="k", n=0), ordering_key="k")
    second = await aclient.insert(Step(key="k", n=1), ordering_key="k")
    async with serving(aclient, {"q": 4}):
        await wait_job(aclient, second.id, "completed", 10)
    assert events == [(0, 1), (0, 2), (1, 1)]
    assert (await aclient.get_job(first.id)).state == "completed"


async def test_a_job_waiting_for_its_callback_keeps_its_turn(aclient: wai.AsyncClient) -> None:
    started: list[int] = []

    @aclient.task(Step, queue="q")
    async def step(job: wai.Job[Step]) -> wai.WaitForCallback | None:
        started.append(job.args.n)
        if job.args.n == 0:  # completed by the callback, never run again
            token = await job.register_callback(timeout=60)
            return wai.WaitForCallback(token)
        return None

    first = await aclient.insert(Step(key="k", n=0), ordering_key="k")
    second = await aclient.insert(Step(key="k", n=1), ordering_key="k")
    async with serving(aclient, {"q": 4}):
        parked = await wait_job(aclient, first.id, "waiting_external")
        await asyncio.sleep(0.5)  # time for a wrongful start of the second job
        assert started == [0]
        assert (await aclient.get_job(second.id)).state == "available"
        assert parked.callback_id is not None
        await aclient.complete_external(parked.callback_id, {"ok": True})
        await wait_job(aclient, second.id, "completed", 10)
    assert started == [0, 1]


@pytest.mark.parametrize("ending", ["failed", "dlq", "cancelled"])
async def test_a_job_that_ends_for_good_gives_its_key_to_the_next(
    aclient: wai.AsyncClient, ending: str
) -> None:
    gate = asyncio.Event()

    @aclient.task(Step, queue="q")
    async def step(job: wai.Job[Step]) -> None:
        if job.args.n == 0:
            if ending == "cancelled":
                await gate.wait()
            raise wai.TerminalError("no")

    first = await aclient.insert(Step(key="k", n=0), ordering_key="k")
    second = await aclient.insert(Step(key="k", n=1), ordering_key="k")
    config = wai.QueueConfig(concurrency=4, dlq=ending == "dlq")
    async with serving(aclient, {"q": config}):
        if ending == "cancelled":
            await wait_job(aclient, first.id, "running")
            await aclient.cancel(first.id)
        await wait_job(aclient, second.id, "completed", 10)
        gate.set()
    if ending == "dlq":
        assert await aclient.dlq_depth("q") == 1
    else:
        assert (await aclient.get_job(first.id)).state == ending
    assert await keys_turns(aclient) == []


async def test_a_kind_rate_limit_holds_back_that_kind_only(aclient: wai.AsyncClient) -> None:
    starts: list[tuple[str, float]] = []

    @aclient.task(Step, queue="q")
    async def step(job: wai.Job[Step]) -> None:
        starts.append(("step", time.monotonic()))

    @aclient.task(Other, queue="q")
    async def other(job: wai.Job[Other]) -> None:
        starts.append(("other", time.monotonic()))

    await aclient.insert_many([Step(key="-", n=n) for n in range(40)])
    await aclient.insert_many([Other(n=n) for n in range(40)])
    config = wai.QueueConfig(
        concurrency=8, kind_rate_limits={"step": wai.RateLimit(10, per=1.0, burst=2)}
    )
    async with serving(aclient, {"q": config}):
        await wait_for(
            lambda: sum(1 for k, _ in starts if k == "other") == 40, 10, what="unlimited kind"
        )
        stats = {s.name: s for s in await aclient.queue_stats()}["q"]
        assert stats.kind_rate_limits == {"step": wai.RateLimit(10, per=1.0, burst=2)}
        assert 0 <= stats.kind_tokens["step"] <= 2
        await wait_for(lambda: len(starts) >= 55, 10, what="15 limited jobs")
    rows = await fetch(
        aclient,
        """SELECT max(n) FROM (
               SELECT count(*) OVER (ORDER BY attempted_at
                                     RANGE BETWEEN CURRENT ROW AND interval '1 second' FOLLOWING)
                   AS n
               FROM wai.jobs WHERE kind = 'step' AND attempted_at IS NOT NULL) AS w""",
    )
    assert rows[0][0] <= 10 + 2


async def test_limits_set_at_run_time_reach_a_running_worker(aclient: wai.AsyncClient) -> None:
    gate = asyncio.Event()

    @aclient.task(Other, queue="q")
    async def other(job: wai.Job[Other]) -> None:
        await gate.wait()

    async with serving(aclient, {"q": 6}):
        await aclient.set_queue_limits("q", global_concurrency=2)
        stats = {s.name: s for s in await aclient.queue_stats()}["q"]
        assert stats.global_concurrency == 2
        await aclient.insert_many([Other(n=n) for n in range(10)])
        await wait_for(lambda: count_state(aclient, "running", 2), 5, what="2 running")
        await asyncio.sleep(0.5)  # time for a wrongful third claim
        assert await count_state(aclient, "running", 2)
        await aclient.set_queue_limits("q", global_concurrency=None)
        await wait_for(lambda: count_state(aclient, "running", 6), 5, what="6 running")
        gate.set()
        await wait_for(lambda: count_state(aclient, "completed", 10), 10, what="all done")


async def test_a_wait_in_place_keeps_its_key_turn_and_its_global_slot(
    aclient: wai.AsyncClient,
) -> None:
    resumed: list[Any] = []
    others: list[int] = []

    @aclient.task(Step, queue="q")
    async def step(job: wai.Job[Step]) -> None:
        if job.args.n == 0:
            token = await job.register_callback(timeout=60)
            resumed.append(await job.wait_for_callback(token))

    @aclient.task(Other, queue="q")
    async def other(job: wai.Job[Other]) -> None:
        others.append(job.args.n)

    first = await aclient.insert(Step(key="k", n=0), ordering_key="k")
    second = await aclient.insert(Step(key="k", n=1), ordering_key="k")
    config = wai.QueueConfig(concurrency=4, global_concurrency=1)
    async with serving(aclient, {"q": config}):
        waiting = await wait_job(
            aclient, first.id, lambda r: r.state == "waiting_external" and r.callback_id is not None
        )
        await aclient.insert(Other(n=1))
        await asyncio.sleep(0.5)  # time for a wrongful start of either job
        assert await keys_turns(aclient) == [("q", "k")]  # the attempt goes on
        assert others == []  # the waiting handler holds the one global slot
        assert (await aclient.get_job(second.id)).state == "available"
        await aclient.resume_external(waiting.callback_id, {"go": True})
        await wait_job(aclient, second.id, "completed", 10)
        await wait_for(lambda: others == [1], 10, what="the unkeyed job")
    assert resumed == [{"go": True}]
    assert await keys_turns(aclient) == []
