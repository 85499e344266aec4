"""The drain's completion poll backs off while the drain has far to go, not at its end."""

from __future__ import annotations

import pytest
from bench import harness


def test_polls_at_the_interval_until_a_rate_is_measured() -> None:
    assert harness.next_poll(0, 20_000, 0.0, 0.05) == 0.05
    assert harness.next_poll(0, 20_000, 1.5, 0.05) == 0.05


def test_waits_a_quarter_of_the_time_left() -> None:
    # 4,000 jobs in 0.4 s, 2,000 left: 0.2 s at that rate, so the next poll in 0.05 s
    assert harness.next_poll(4_000, 2_000, 0.4, 0.01) == pytest.approx(0.05)


def test_never_waits_longer_than_the_cap_nor_shorter_than_the_interval() -> None:
    assert harness.next_poll(1_000, 1_000_000, 1.0, 0.05) == harness.POLL_MAX
    assert harness.next_poll(10_000, 10, 1.0, 0.05) == 0.05
