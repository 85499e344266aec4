"""Passes whose cost grows with dead index entries space themselves out (pure, and a loop)."""

from __future__ import annotations

import asyncio

import pytest

from wai.maintenance import (
    Aging,
    Analyzer,
    Cleaner,
    CronFirer,
    DepthSampler,
    OutboxSweeper,
    PeriodicService,
    Promoter,
    Rescuer,
)
from wai.maintenance._service import SCAN_SHARE, SPACED_FROM, START_SPREAD, spaced, staggered

pytestmark = pytest.mark.timeout(10)


def test_a_quick_pass_keeps_the_services_own_wait() -> None:
    assert spaced(10.0, 0.15, 0.02) == 10.0  # 7.35 s: less than the wait
    # below SPACED_FROM, never spaced: a short interval keeps its cadence
    assert spaced(0.1, SPACED_FROM * 0.9, 0.02) == 0.1


def test_a_slow_pass_keeps_the_passes_to_their_share_of_the_time() -> None:
    # 1 s of work may be 2 % of the time: 49 s of waiting follow it
    assert spaced(10.0, 1.0, 0.02) == pytest.approx(49.0)
    assert spaced(10.0, 0.5, 0.5) == 10.0


def test_no_share_no_bound() -> None:
    assert spaced(10.0, 1000.0, None) == 10.0


def test_a_new_leaders_services_begin_one_after_another() -> None:
    # four services over 5 s: 1, 2, 3 and 4 s, each no later than its own interval
    assert staggered([60.0, 60.0, 60.0, 60.0], 5.0) == pytest.approx([1.0, 2.0, 3.0, 4.0])
    assert staggered([0.5, 60.0, 2.5, 60.0], 5.0) == pytest.approx([0.5, 2.0, 2.5, 4.0])
    # short intervals (tests, a busy deployment) keep their first pass within one interval
    assert staggered([0.05] * 9) == [0.05] * 9
    assert staggered([]) == []
    starts = staggered([60.0] * 9)
    assert starts == sorted(starts)
    assert max(starts) < START_SPREAD


class _Slow(PeriodicService):
    share = 0.2
    passes = 0

    async def run_once(self) -> None:
        self.passes += 1
        await asyncio.sleep(SPACED_FROM + 0.05)


async def test_the_loop_waits_by_how_long_the_last_pass_took() -> None:
    service = _Slow(None, "wai", interval=0.001)  # type: ignore[arg-type]  # no database
    task = asyncio.create_task(service.run_forever())
    # a pass of 0.15 s may be a fifth of the time: 0.6 s of waiting follow it, so one
    # pass in 0.5 s (without the bound: a pass every 0.151 s, 4)
    await asyncio.sleep(0.5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert service.passes == 1
    assert service._after() >= SPACED_FROM + 0.05  # pyright: ignore[reportPrivateUsage]


def test_the_passes_that_read_every_live_row_of_a_state_are_bounded() -> None:
    assert Rescuer.share == DepthSampler.share == Aging.share == SCAN_SHARE
    # paced by their own work or due times: unchanged
    for service in (Cleaner, Promoter, CronFirer, OutboxSweeper, Analyzer):
        assert service.share is None
