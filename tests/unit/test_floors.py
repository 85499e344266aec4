"""The claim floors' decisions (wai.worker._floors), without a database."""

from __future__ import annotations

import pytest

from wai.worker._floors import (
    NO_FLOORS,
    PROBE_AFTER_JOBS,
    PROBE_INTERVAL,
    Floors,
    Probe,
    lsn,
    raised,
)

EMPTY = (None, None, None, None)


def test_raised_moves_to_the_front_but_not_past_the_bound() -> None:
    assert raised((0, 0, 0, 0), (5, None, 50, 3), 10) == (5, 10, 10, 3)


def test_raised_never_lowers_a_floor() -> None:
    assert raised((20, 7, 0, 0), (None, 4, None, None), 10) == (20, 7, 10, 10)


@pytest.mark.parametrize(
    ("text", "value"), [("0/0", 0), ("0/1D642F88", 0x1D642F88), ("3/10", (3 << 32) + 16)]
)
def test_lsn(text: str, value: int) -> None:
    assert lsn(text) == value


def test_a_probe_settled_in_its_own_snapshot_moves_at_once() -> None:
    floors = Floors()
    floors.settle(Probe(100, xid=50, lsn=7), (None, 42, None, None), xmin=51, flushed=7, server="a")
    assert floors.values == (101, 42, 101, 101)
    assert floors.pending is None
    assert floors.settled_top == 100


def test_a_transaction_older_than_the_probe_holds_it() -> None:
    floors = Floors()
    first = Probe(100, xid=50, lsn=7)
    # Transaction 40 still runs: it may hold a number up to 100. Nothing moves.
    floors.settle(first, EMPTY, xmin=40, flushed=9, server="a")
    assert floors.values == NO_FLOORS
    assert floors.pending == first
    # Still running at the next probe: the first probe stays the pending one.
    floors.settle(Probe(180, xid=60, lsn=9), EMPTY, xmin=40, flushed=9, server="a")
    assert floors.values == NO_FLOORS
    assert floors.pending == first
    # 40 has ended, 55 runs: the first probe is settled (55 took its id after its xid),
    # not the third, which waits in turn.
    third = Probe(250, xid=70, lsn=12)
    floors.settle(third, (None, 60, 140, None), xmin=55, flushed=12, server="a")
    assert floors.values == (101, 60, 101, 101)
    assert floors.pending == third
    assert floors.settled_top == 100


def test_an_unflushed_wal_holds_the_probe() -> None:
    # After a crash the sequence resumes from its last durable record: a number read
    # from an unflushed one may be handed out again.
    floors = Floors()
    floors.settle(Probe(100, xid=50, lsn=900), EMPTY, xmin=51, flushed=899, server="a")
    assert floors.values == NO_FLOORS
    floors.settle(Probe(120, xid=52, lsn=950), EMPTY, xmin=53, flushed=950, server="a")
    assert floors.values == (121,) * 4


def test_a_straggler_below_the_fronts_keeps_its_lane_floor_below_it() -> None:
    # Job 5 was inserted by transaction 3, not committed yet: the first probe's front of
    # lane 2 is job 8, and 3 runs, so the floor must not pass 5.
    floors = Floors()
    floors.settle(Probe(10, xid=9, lsn=1), (None, 8, None, None), xmin=3, flushed=1, server="a")
    assert floors.values[1] <= 5
    # Transaction 3 commits; the next snapshot sees job 5 as the front.
    floors.settle(Probe(12, xid=11, lsn=2), (None, 5, None, None), xmin=12, flushed=2, server="a")
    assert floors.values[1] == 5


def test_another_server_starts_the_floors_again() -> None:
    floors = Floors()
    floors.settle(Probe(100, xid=50, lsn=7), EMPTY, xmin=51, flushed=7, server="a")
    assert floors.values == (101,) * 4
    # A failover: the new primary may have handed out fewer numbers.
    floors.settle(Probe(90, xid=10, lsn=3), EMPTY, xmin=5, flushed=3, server="b")
    assert floors.values == NO_FLOORS
    assert floors.pending == Probe(90, xid=10, lsn=3)
    assert floors.settled_top == -1


def test_due_after_the_interval_and_enough_claimed_jobs() -> None:
    floors = Floors()
    assert floors.due(0.0)  # a new process probes first
    floors.probing(10.0)
    floors.claimed += PROBE_AFTER_JOBS
    assert not floors.due(10.0 + PROBE_INTERVAL / 2)
    assert floors.due(10.0 + 2 * PROBE_INTERVAL)
    # A quiet queue: time has passed, but too few jobs were taken to leave entries worth
    # a probe (three statements and a transaction id) behind.
    floors.probing(20.0)
    floors.claimed += PROBE_AFTER_JOBS - 1
    assert not floors.due(30.0)
    floors.claimed += 1
    assert floors.due(30.0)
