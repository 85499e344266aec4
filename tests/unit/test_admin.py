"""Operator-action checks and models without a database: ids, messages, stats, payloads."""

from __future__ import annotations

from typing import Any

import pytest

import wai
from wai._admin import (
    CANCELLABLE_STATES,
    EXACT_COUNT_LIMIT,
    FINISHED_STATES,
    RETRYABLE_STATES,
    QueueStats,
    check_job_id,
    counts_finished_exactly,
    queue_stats,
    rejected,
)
from wai.worker._notifier import parse_cancel


def test_check_job_id_accepts_positive_64_bit_integers() -> None:
    assert check_job_id(1) == 1
    assert check_job_id(2**63 - 1) == 2**63 - 1


@pytest.mark.parametrize("job_id", [0, -1, 2**63, 2**80])
def test_check_job_id_out_of_range_is_not_found(job_id: int) -> None:
    with pytest.raises(wai.JobNotFound, match=f"no job with id {job_id}"):
        check_job_id(job_id)


@pytest.mark.parametrize("job_id", ["1", 1.0, True, None, b"1"])
def test_check_job_id_rejects_non_integers(job_id: object) -> None:
    with pytest.raises(wai.ValidationError, match="a job id is an integer"):
        check_job_id(job_id)


def test_rejected_names_the_job_its_state_and_the_allowed_states() -> None:
    err = rejected("retry", 7, "running", RETRYABLE_STATES)
    assert isinstance(err, wai.InvalidStateError)
    assert err.state == "running"
    assert str(err) == (
        "cannot retry job 7: it is running; retry applies to waiting_external, failed or "
        "cancelled jobs"
    )
    assert "scheduled, available, running, retryable or waiting_external" in str(
        rejected("cancel", 7, "completed", CANCELLABLE_STATES)
    )


def test_queue_stats_fill_missing_states_with_zero() -> None:
    stats = QueueStats.from_record(
        {
            "name": "q",
            "counts": {"available": 3, "failed": 1},
            "paused": True,
            "paused_at": None,
            "oldest_available_lag": 1.5,
        }
    )
    assert list(stats.counts) == [s.value for s in wai.JobState]
    assert stats.counts["available"] == 3
    assert stats.counts["running"] == 0
    assert stats.total == 4
    assert stats.paused
    assert stats.oldest_available_lag == 1.5


def _live(name: str, **counts: int) -> dict[str, Any]:
    return {"name": name, "counts": counts, "paused": False, "paused_at": None,
            "oldest_available_lag": 0.0}  # fmt: skip


def test_queue_stats_merge_finished_counts_and_mark_estimates() -> None:
    finished = [
        {"name": "a", "state": "completed", "n": 1234.6},
        {"name": "a", "state": "available", "n": 99.0},  # estimates cover live states: ignored
        {"name": "z", "state": "failed", "n": 3.0},  # a queue with finished jobs only
    ]
    stats = queue_stats([_live("a", available=2)], finished, estimated=True)
    assert [q.name for q in stats] == ["a", "z"]
    a, z = stats
    assert a.counts["completed"] == 1235
    assert a.counts["available"] == 2
    assert a.estimated == FINISHED_STATES == ("completed", "failed", "cancelled")
    assert z.counts["failed"] == 3
    assert z.total == 3
    assert not z.paused
    exact = queue_stats([_live("a", available=2)], finished[:1], estimated=False)
    assert exact[0].estimated == ()


@pytest.mark.parametrize(
    ("rows", "have_estimates", "exact"),
    [
        (None, True, True),  # never analyzed: nothing to estimate from
        (10.0, True, True),
        (float(EXACT_COUNT_LIMIT), True, True),
        (EXACT_COUNT_LIMIT + 1.0, True, False),
        (5e6, True, False),
        (5e6, False, True),  # statistics not visible to the role: count
    ],
)
def test_finished_jobs_are_counted_on_small_tables_only(
    rows: float | None, have_estimates: bool, exact: bool
) -> None:
    assert counts_finished_exactly(rows, have_estimates) is exact


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        ('{"job_id": 5, "run_lease": 2}', (5, 2)),
        ('{"job_id" : 5, "run_lease" : 2, "extra": 1}', (5, 2)),
        ("garbage", None),
        ("[]", None),
        ("null", None),
        ('{"job_id": "5", "run_lease": 2}', None),
        ('{"job_id": true, "run_lease": 2}', None),
        ('{"job_id": 5}', None),
    ],
)
def test_parse_cancel(payload: str, expected: tuple[int, int] | None) -> None:
    assert parse_cancel(payload) == expected
