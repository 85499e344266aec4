"""How many jobs a queue's claim loop may claim (pure: no database)."""

from __future__ import annotations

import asyncio
import concurrent.futures

import wai
from wai.worker._producer import (
    CLAIMS_IN_FLIGHT,
    QueueProducer,
    claim_due,
    claim_limit,
    claim_size,
)


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


# -- claims in flight (claim_due, claim_limit) ------------------------------------------


def test_a_backlog_is_claimed_with_all_the_room_one_claim_at_a_time() -> None:
    assert claim_limit(128, cap=128, in_flight=0, most=2, backlog=True, woken=False) == 128
    assert claim_limit(100, cap=64, in_flight=0, most=2, backlog=True, woken=False) == 64
    # behind a full claim still on the server, the next waits for it
    assert not claim_due(in_flight=1, most=2, backlog=True, woken=False)
    assert claim_limit(60, cap=128, in_flight=1, most=2, backlog=True, woken=False) == 0


def test_a_claim_sent_on_a_wakeup_leaves_room_for_a_second() -> None:
    assert claim_limit(128, cap=128, in_flight=0, most=2, backlog=False, woken=True) == 64
    assert claim_limit(5, cap=128, in_flight=0, most=2, backlog=False, woken=True) == 3
    assert claim_limit(1, cap=128, in_flight=0, most=2, backlog=False, woken=True) == 1
    # a wakeup during that claim sends a second one for what is left
    assert claim_due(in_flight=1, most=2, backlog=False, woken=True)
    assert claim_limit(64, cap=128, in_flight=1, most=2, backlog=False, woken=True) == 64
    assert claim_limit(64, cap=16, in_flight=1, most=2, backlog=True, woken=True) == 16


def test_no_claim_without_a_free_slot_a_reason_or_below_the_most_in_flight() -> None:
    assert claim_limit(0, cap=8, in_flight=0, most=2, backlog=True, woken=True) == 0
    assert claim_limit(-3, cap=8, in_flight=1, most=2, backlog=False, woken=True) == 0
    assert claim_limit(8, cap=8, in_flight=0, most=2, backlog=False, woken=False) == 0
    assert claim_limit(8, cap=8, in_flight=2, most=2, backlog=True, woken=True) == 0
    # a queue under flow control: one claim at a time, whatever wakes it
    assert claim_limit(8, cap=8, in_flight=0, most=1, backlog=False, woken=True) == 8
    assert not claim_due(in_flight=1, most=1, backlog=False, woken=True)
    assert claim_limit(8, cap=8, in_flight=1, most=1, backlog=True, woken=True) == 0


def test_a_queue_claims_one_at_a_time_until_its_limits_are_read_and_while_it_has_any() -> None:
    p = producer(10, writers=1)
    assert p._most_in_flight() == 1  # pyright: ignore[reportPrivateUsage]
    p._flow_read_at = 0.0  # pyright: ignore[reportPrivateUsage]
    assert p._most_in_flight() == CLAIMS_IN_FLIGHT == 2  # pyright: ignore[reportPrivateUsage]
    p.limited = True
    assert p._most_in_flight() == 1  # pyright: ignore[reportPrivateUsage]


def test_claims_come_in_a_few_sizes_rounded_down_within_the_slots() -> None:
    sizes = {claim_size(n, 128) for n in range(1, 1000)}
    assert sorted(sizes) == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128]
    assert all(claim_size(n, 128) <= n for n in range(1000))
    rounded = [claim_size(n, 128) for n in (0, 5, 7, 11, 13, 100, 127, 128, 500)]
    assert rounded == [0, 4, 6, 8, 12, 96, 96, 128, 128]
    # an odd cap is a size too
    assert sorted({claim_size(n, 100) for n in range(1, 300)})[-3:] == [64, 96, 100]
    assert claim_size(7, 5) == 5
    # a claim on a wakeup: half the room, rounded down; the second: the rest, rounded down
    assert claim_limit(120, cap=128, in_flight=0, most=2, backlog=False, woken=True) == 48
    assert claim_limit(120, cap=128, in_flight=1, most=2, backlog=False, woken=True) == 96
