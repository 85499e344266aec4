"""How soon the retention cleaner runs again (pure), and the loop that follows it."""

from __future__ import annotations

import asyncio

import pytest

from wai._supervise import repeat
from wai.maintenance.cleaner import MIN_WAIT, next_cleanup_wait

pytestmark = pytest.mark.timeout(10)


def _wait(deleted: int, elapsed: float, *, more: bool = False, interval: float = 60.0) -> float:
    return next_cleanup_wait(deleted, elapsed, more=more, batch_size=1000, interval=interval)


def test_a_pass_that_deleted_nothing_waits_the_interval() -> None:
    assert _wait(0, 60.0) == 60.0
    assert _wait(0, 0.0) == 60.0


def test_a_steady_flow_is_deleted_about_a_batch_a_pass() -> None:
    # 100 jobs/s expiring: a batch of 1000 every 10 s instead of 6000 at once a minute
    assert _wait(6000, 60.0) == pytest.approx(10.0)
    # the next pass, 10 s later, at the same rate: the same wait
    assert _wait(1000, 10.0) == pytest.approx(10.0)


def test_a_fast_flow_is_deleted_every_min_wait_and_a_slow_one_every_interval() -> None:
    assert _wait(3600, 1.0) == MIN_WAIT  # thousands a second: a few batches a pass
    assert _wait(500, 60.0) == 60.0  # a batch would take two minutes to expire


def test_rows_left_at_the_budget_bring_the_next_pass_at_min_wait() -> None:
    assert _wait(10_000, 60.0, more=True) == MIN_WAIT


def test_the_wait_never_exceeds_a_short_interval() -> None:
    assert _wait(10, 0.1, interval=0.1) == 0.1
    assert _wait(5000, 0.1, more=True, interval=0.1) == 0.1
    assert _wait(0, 0.1, interval=0.1) == 0.1


async def test_repeat_waits_what_after_says_after_a_pass_that_succeeded() -> None:
    calls: list[float] = []
    fifth = asyncio.Event()

    async def step() -> None:
        calls.append(asyncio.get_running_loop().time())
        if len(calls) == 5:
            fifth.set()

    task = asyncio.create_task(repeat("step", step, interval=30.0, after=lambda: 0.01))
    try:
        # five passes in well under the 30-s interval: each followed by after()'s wait
        await asyncio.wait_for(fifth.wait(), 5.0)
    finally:
        task.cancel()
    assert calls[4] - calls[0] < 5.0


async def test_repeat_backs_off_a_failing_pass_whatever_after_says() -> None:
    calls = 0

    async def step() -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("boom")

    task = asyncio.create_task(repeat("step", step, interval=0.2, after=lambda: 0.0))
    await asyncio.sleep(0.5)
    task.cancel()
    # 0 s, then 0.2 s and 0.4 s doubling: not the tight loop after() would make
    assert 1 < calls <= 3
