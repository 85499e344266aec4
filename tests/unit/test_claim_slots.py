"""How many jobs a queue's claim loop may claim (pure: no database)."""

from __future__ import annotations

import asyncio
import concurrent.futures

import wai
from wai.worker._producer import QueueProducer


def producer(concurrency: int, writers: int) -> QueueProducer:
    return QueueProducer(
        "q",
        wai.QueueConfig(concurrency=concurrency),
        pool=None,  # type: ignore[arg-type]  # free_slots and hold never use it
        schema="wai",
        poll_interval=1.0,
        burst=False,
        deadlines={},
        launch=lambda rows, p: None,
        writers=writers,
    )


def test_outcomes_waiting_to_be_written_take_slots_beyond_one_concurrency_per_writer() -> None:
    p = producer(10, writers=2)
    assert p.free_slots() == 10
    p.running = 10
    assert p.free_slots() == 0
    p.running, p.finishing = 0, 20  # two writers' worth: claims may go on
    assert p.free_slots() == 10
    p.finishing = 25
    assert p.free_slots() == 5
    p.finishing = 40
    assert p.free_slots() == -10  # nothing to claim until the finalizer catches up


async def test_a_thread_past_its_deadline_keeps_its_slot_until_it_ends() -> None:
    p = producer(2, writers=1)
    call: concurrent.futures.Future[None] = concurrent.futures.Future()
    p.hold(call)
    assert p.free_slots() == 1
    call.set_result(None)  # the thread returned
    await asyncio.sleep(0)  # its release is scheduled on the loop
    assert p.free_slots() == 2


async def test_a_thread_that_ended_before_the_hold_frees_its_slot_at_once() -> None:
    p = producer(2, writers=1)
    call: concurrent.futures.Future[None] = concurrent.futures.Future()
    call.set_result(None)
    p.hold(call)
    await asyncio.sleep(0)
    assert p.free_slots() == 2
