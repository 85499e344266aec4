from __future__ import annotations

import random

import pytest

from wai._retry import MAX_BACKOFF, OUTBOX_MAX_BACKOFF, backoff, outbox_backoff


class FixedRandom(random.Random):
    """A Random whose ``random()`` always returns ``value``."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


@pytest.mark.parametrize(("attempt", "base"), [(1, 2.0), (2, 4.0), (3, 8.0), (10, 1024.0)])
def test_backoff_without_jitter_is_two_to_the_attempt(attempt: int, base: float) -> None:
    assert backoff(attempt, rand=FixedRandom(0.0)) == base


@pytest.mark.parametrize("attempt", [1, 2, 5, 10, 15])
def test_backoff_jitter_adds_at_most_a_quarter(attempt: int) -> None:
    base = 2.0**attempt
    assert backoff(attempt, rand=FixedRandom(0.999999)) == pytest.approx(base * 1.25, rel=1e-5)
    for seed in range(20):
        assert base <= backoff(attempt, rand=random.Random(seed)) <= base * 1.25


def test_backoff_grows_with_attempts() -> None:
    delays = [backoff(a, rand=FixedRandom(0.5)) for a in range(1, 17)]
    assert delays == sorted(delays)
    assert len(set(delays)) == len(delays)


@pytest.mark.parametrize("attempt", [17, 20, 25, 100, 10_000])
def test_backoff_is_capped_at_a_day(attempt: int) -> None:
    assert backoff(attempt, rand=FixedRandom(0.999)) == MAX_BACKOFF
    assert MAX_BACKOFF == 86_400.0


@pytest.mark.parametrize("attempt", [0, -1, -100])
def test_backoff_treats_nonpositive_attempts_as_the_first(attempt: int) -> None:
    assert backoff(attempt, rand=FixedRandom(0.0)) == 2.0


def test_backoff_is_deterministic_for_a_seeded_random() -> None:
    assert backoff(4, rand=random.Random(7)) == backoff(4, rand=random.Random(7))


def test_backoff_default_random_stays_in_bounds() -> None:
    for _ in range(50):
        assert 8.0 <= backoff(3) <= 10.0


def test_outbox_backoff_doubles_without_jitter_up_to_an_hour() -> None:
    assert [outbox_backoff(a) for a in range(1, 14)] == [
        2.0,
        4.0,
        8.0,
        16.0,
        32.0,
        64.0,
        128.0,
        256.0,
        512.0,
        1024.0,
        2048.0,
        OUTBOX_MAX_BACKOFF,
        OUTBOX_MAX_BACKOFF,
    ]
    assert outbox_backoff(10_000) == OUTBOX_MAX_BACKOFF


def test_cap_and_jitter_are_parameters_of_the_one_definition() -> None:
    assert backoff(3, jitter=0.0, rand=FixedRandom(0.99)) == 8.0
    assert backoff(3, cap=5.0, rand=FixedRandom(0.5)) == 5.0
