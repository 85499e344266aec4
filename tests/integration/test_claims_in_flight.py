"""Two claims of one queue on the server at once (wai.worker._producer): a job committed
while a claim runs is taken by a second claim sent at once, and the two never start more
attempts than the queue's concurrency. A queue under flow control keeps one at a time.

Claims are slowed on the server by a trigger (a sleep per row a claim starts), so that
jobs inserted meanwhile wake the worker while its claim is still on the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import wai
from tests.integration._helpers import Work, count, fetch, runtime_of, serving, wait_for
from wai._job import JobRow
from wai.worker._producer import QueueProducer

pytestmark = pytest.mark.timeout(60)

#: Seconds each row a claim starts costs on the server.
ROW_DELAY = 0.03


async def slow_claims(client: wai.AsyncClient) -> None:
    await fetch(
        client,
        """
        CREATE FUNCTION wai.test_slow_claim() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_sleep(0.03);
            RETURN NEW;
        END $$;
        CREATE TRIGGER test_slow_claim BEFORE UPDATE ON wai.jobs FOR EACH ROW
            WHEN (OLD.state = 'available' AND NEW.state = 'running')
            EXECUTE FUNCTION wai.test_slow_claim();
        """,
    )


class Claims:
    """Counts the claims of one producer on the server at once (wrapping its own)."""

    def __init__(self, producer: QueueProducer) -> None:
        self.now = 0
        self.most = 0
        self.sent = 0
        claim: Callable[[int], Awaitable[list[JobRow]]] = producer._claim  # pyright: ignore[reportPrivateUsage]

        async def counted(limit: int) -> list[JobRow]:
            self.now += 1
            self.sent += 1
            self.most = max(self.most, self.now)
            try:
                return await claim(limit)
            finally:
                self.now -= 1

        producer._claim = counted  # type: ignore[method-assign]  # pyright: ignore[reportPrivateUsage]


async def trickle(client: wai.AsyncClient, groups: int, size: int) -> None:
    """``groups`` transactions of ``size`` jobs, one every 20 ms (each sends a NOTIFY)."""
    for g in range(groups):
        await client.insert_many([Work(n=g * size + i) for i in range(size)])
        await asyncio.sleep(0.02)


async def all_completed(client: wai.AsyncClient, n: int, timeout: float) -> None:
    """Wait until ``n`` jobs are completed."""

    async def done() -> bool:
        return await count(client, "state = 'completed'") == n

    await wait_for(done, timeout)


async def held_handlers(
    client: wai.AsyncClient, queue: str
) -> tuple[asyncio.Event, Callable[[], tuple[int, int]]]:
    """Register a handler of ``queue`` that holds its slot until the returned event is set;
    the callable returns (running now, most at once)."""
    gate = asyncio.Event()
    active = peak = 0

    @client.task(Work, queue=queue)
    async def handler(job: wai.Job[Work]) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        try:
            await asyncio.wait_for(gate.wait(), 30)
        finally:
            active -= 1

    return gate, lambda: (active, peak)


async def test_a_job_committed_during_a_claim_is_taken_by_a_second_claim_within_the_concurrency(
    aclient: wai.AsyncClient,
) -> None:
    gate, seen = await held_handlers(aclient, "q")
    await slow_claims(aclient)
    try:
        async with serving(aclient, {"q": 4}):
            producer = runtime_of(aclient).producers["q"]
            await wait_for(lambda: producer.claims >= 1)  # its limits are read
            claims = Claims(producer)
            # Groups of three, every 20 ms, into claims of 30 ms a row: a group commits
            # while the claim of the one before is on the server.
            await trickle(aclient, groups=8, size=3)
            await wait_for(lambda: seen()[0] == 4)
            await asyncio.sleep(0.3)  # an over-eager second claim would start more
            assert await count(aclient, "state = 'running'") == 4
            assert seen() == (4, 4)
            assert claims.most == 2, "no second claim was sent during a claim"
            gate.set()

            await all_completed(aclient, 24, 20)
    finally:
        gate.set()
    assert seen()[1] == 4
    assert await count(aclient, "state <> 'completed'") == 0


async def test_two_claims_in_flight_start_every_job_once_at_a_steady_rate(
    aclient: wai.AsyncClient,
) -> None:
    ran: dict[int, int] = {}
    active = peak = 0

    @aclient.task(Work, queue="q")
    async def handler(job: wai.Job[Work]) -> None:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        ran[job.args.n] = ran.get(job.args.n, 0) + 1
        try:
            await asyncio.sleep(0.01 * (job.args.n % 5))
        finally:
            active -= 1

    await slow_claims(aclient)
    async with serving(aclient, {"q": 3}):
        producer = runtime_of(aclient).producers["q"]
        await wait_for(lambda: producer.claims >= 1)
        claims = Claims(producer)
        await trickle(aclient, groups=30, size=2)

        await all_completed(aclient, 60, 30)
    assert claims.most == 2
    assert peak <= 3
    assert ran == dict.fromkeys(range(60), 1)
    rows = await fetch(aclient, "SELECT count(*) FROM wai.jobs WHERE attempt <> 1")
    assert rows == [(0,)]


@pytest.mark.parametrize(
    "limits",
    [
        {"global_concurrency": 3},
        {"rate_limit": wai.RateLimit(1000, per=1.0, burst=1000)},
    ],
    ids=["global-concurrency", "rate-limit"],
)
async def test_a_queue_under_flow_control_keeps_one_claim_at_a_time(
    aclient: wai.AsyncClient, limits: dict[str, Any]
) -> None:
    gate, seen = await held_handlers(aclient, "lim")
    await slow_claims(aclient)
    config = wai.QueueConfig(concurrency=4, **limits)
    cap = limits.get("global_concurrency", 4)
    try:
        async with serving(aclient, {"lim": config}):
            producer = runtime_of(aclient).producers["lim"]
            await wait_for(lambda: producer.claims >= 1 and producer.limited)
            claims = Claims(producer)
            await trickle(aclient, groups=8, size=3)
            await wait_for(lambda: seen()[0] == cap)
            await asyncio.sleep(0.3)
            assert await count(aclient, "state = 'running'") == cap
            assert claims.sent >= 2
            assert claims.most == 1
            gate.set()

            await all_completed(aclient, 24, 20)
    finally:
        gate.set()
    assert seen()[1] == cap


async def test_shutdown_waits_for_both_claims_in_flight_and_runs_what_they_took(
    aclient: wai.AsyncClient,
) -> None:
    started: list[int] = []

    @aclient.task(Work, queue="q")
    async def handler(job: wai.Job[Work]) -> None:
        started.append(job.args.n)

    await slow_claims(aclient)
    await aclient.start({"q": 8}, poll_interval=0.1, promote_interval=0.05)
    stopped = False
    try:
        producer = runtime_of(aclient).producers["q"]
        await wait_for(lambda: producer.claims >= 1)
        claims = Claims(producer)
        await aclient.insert_many([Work(n=i) for i in range(4)])
        await wait_for(lambda: claims.now == 1)
        await aclient.insert_many([Work(n=i) for i in range(4, 8)])
        await wait_for(lambda: claims.now == 2, interval=0.005)
        await aclient.shutdown(timeout=5)
        stopped = True
    finally:
        if not stopped:
            await aclient.shutdown(timeout=5)
    # Whatever the two claims took ran and was written; nothing is left running.
    assert await count(aclient, "state = 'running'") == 0
    completed = {
        n
        for (n,) in await fetch(
            aclient, "SELECT (args->>'n')::int FROM wai.jobs WHERE state = 'completed'"
        )
    }
    assert completed == set(started)
    assert len(started) == len(completed)
    assert await count(aclient, "state = 'available'") == 8 - len(started)


async def test_a_second_claim_is_sent_only_with_a_pooled_connection_to_spare(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    # The worker's client has three connections; jobs come from another (aclient).
    client = wai.AsyncClient(database_url, max_connections=3)
    await client.open()
    done = 0

    @aclient.task(Work, queue="q")
    async def never_run_here(job: wai.Job[Work]) -> None:
        raise AssertionError("aclient serves no queue")

    @client.task(Work, queue="q")
    async def handler(job: wai.Job[Work]) -> None:
        nonlocal done
        done += 1

    await slow_claims(client)
    try:
        async with serving(client, {"q": 8}, maintenance=False):
            producer = runtime_of(client).producers["q"]
            await wait_for(lambda: producer.claims >= 1)
            claims = Claims(producer)
            # Two of the three connections held elsewhere: the one left serves one claim
            # at a time (and the finalizer and heartbeats between them).
            async with client.pool.connection(), client.pool.connection():
                await trickle(aclient, groups=8, size=3)
                await wait_for(lambda: done == 24, 20)
                assert claims.sent >= 2
                assert claims.most == 1
            await trickle(aclient, groups=8, size=3)
            await wait_for(lambda: done == 48, 20)
            assert claims.most == 2
    finally:
        await client.close()
