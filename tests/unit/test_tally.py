"""The in-memory tally of outcomes per minute: keys, taking, giving back, bounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from wai._tally import EVENTS, OUTCOME_EVENTS, Tally, minute_of

T = datetime(2026, 12, 4, 13, 7, 41, 123456, tzinfo=UTC)


def test_minute_of_truncates_in_utc() -> None:
    assert minute_of(T) == datetime(2026, 12, 4, 13, 7, tzinfo=UTC)
    paris = T.astimezone(timezone(timedelta(hours=1)))
    assert minute_of(paris) == minute_of(T)
    assert minute_of(paris).tzinfo is UTC


def test_every_outcome_event_maps_to_a_counted_event() -> None:
    assert set(OUTCOME_EVENTS.values()) <= set(EVENTS)
    assert OUTCOME_EVENTS["exhausted"] == "failed"
    assert OUTCOME_EVENTS["waiting_for_callback"] == "parked"


def test_add_counts_by_minute_queue_kind_and_event() -> None:
    tally = Tally()
    m = minute_of(T)
    tally.add("q", "k", "completed", minute=m)
    tally.add("q", "k", "completed", 2, minute=m)
    tally.add("q", "k", "failed", minute=m)
    tally.add("q", "other", "completed", minute=m + timedelta(minutes=1))
    assert len(tally) == 3
    taken = tally.take()
    assert taken == {
        (m, "q", "k", "completed"): 3,
        (m, "q", "k", "failed"): 1,
        (m + timedelta(minutes=1), "q", "other", "completed"): 1,
    }
    assert list(taken) == sorted(taken)  # written in key order: no deadlock between writers
    assert tally.take() == {}


def test_add_without_a_minute_uses_the_current_one() -> None:
    tally = Tally()
    before = minute_of(datetime.now(UTC))
    tally.add("q", "k", "completed")
    [(minute, *_)] = tally.take()
    assert before <= minute <= minute_of(datetime.now(UTC))


def test_restore_gives_back_counts_merged_with_new_ones() -> None:
    tally = Tally()
    m = minute_of(T)
    tally.add("q", "k", "completed", 2, minute=m)
    taken = tally.take()
    tally.add("q", "k", "completed", 5, minute=m)  # counted while the write failed
    tally.restore(taken, now=T)
    assert tally.take() == {(m, "q", "k", "completed"): 7}
    assert tally.dropped == 0


def test_restore_drops_minutes_past_the_retention() -> None:
    tally = Tally(keep=timedelta(hours=1))
    old = minute_of(T) - timedelta(hours=2)
    tally.restore({(old, "q", "k", "completed"): 4}, now=T)
    assert tally.take() == {}
    assert tally.dropped == 4


def test_the_oldest_minutes_go_first_when_too_many_keys() -> None:
    tally = Tally(max_keys=3)
    m = minute_of(T)
    for i in range(5):
        tally.add("q", "k", "completed", i + 1, minute=m + timedelta(minutes=i))
    assert [key[0] for key in tally.take()] == [m + timedelta(minutes=i) for i in (2, 3, 4)]
    assert tally.dropped == 1 + 2
