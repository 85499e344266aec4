"""How long idle loops wait (wai._pace): the pure decision and the wakeups."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from wai._pace import Wakeups, next_wait, wait_woken


def test_without_listen_a_loop_keeps_its_interval() -> None:
    # nothing could wake it sooner: backing off would delay work by the back-off
    for idle in (0, 1, 10, 1000):
        assert next_wait(1.0, cap=30.0, idle=idle, listening=False) == 1.0
    assert next_wait(0.5, cap=30.0, idle=5, listening=False, due_in=100.0) == 0.5


def test_while_listening_each_idle_pass_doubles_the_wait_up_to_the_cap() -> None:
    waits = [next_wait(1.0, cap=30.0, idle=n, listening=True) for n in range(8)]
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    # a huge count does not overflow
    assert next_wait(1.0, cap=30.0, idle=10**9, listening=True) == 30.0


def test_a_known_due_time_bounds_the_wait_but_never_below_the_interval() -> None:
    assert next_wait(0.5, cap=30.0, idle=10, listening=True, due_in=3.0) == 3.0
    assert next_wait(0.5, cap=30.0, idle=10, listening=True, due_in=0.1) == 0.5
    assert next_wait(0.5, cap=30.0, idle=10, listening=True, due_in=-5.0) == 0.5
    assert next_wait(0.5, cap=30.0, idle=10, listening=True, due_in=300.0) == 30.0
    # a cap below the interval (a long poll_interval) never shortens the interval
    assert next_wait(60.0, cap=30.0, idle=3, listening=True) == 60.0


async def test_wakeups_reach_every_loop_through_its_own_event() -> None:
    wakeups = Wakeups()
    a, b = wakeups.event(), wakeups.event()
    wakeups.set()
    assert a.is_set()
    assert b.is_set()
    a.clear()  # one loop clearing its event hides nothing from the other
    assert b.is_set()
    wakeups.set()
    assert a.is_set()


def test_wakeups_forget_the_events_of_ended_loops() -> None:
    wakeups = Wakeups()
    event = wakeups.event()
    assert len(list(wakeups._events)) == 1  # pyright: ignore[reportPrivateUsage]
    del event
    gc.collect()
    assert list(wakeups._events) == []  # pyright: ignore[reportPrivateUsage]


async def test_wait_woken_ends_early_on_the_event_but_not_before_the_floor() -> None:
    event = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, event.set)
    started = time.monotonic()
    await wait_woken(event, 30.0, floor=0.2)
    elapsed = time.monotonic() - started
    assert 0.2 <= elapsed < 5


async def test_wait_woken_propagates_a_cancellation_that_meets_the_event() -> None:
    # the shutdown case: the task is cancelled in the same turn its event is set
    event = asyncio.Event()
    task = asyncio.create_task(wait_woken(event, 30.0))
    await asyncio.sleep(0.01)
    event.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
