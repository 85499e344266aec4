"""Operator-action checks and models without a database: ids, messages, stats, payloads."""

from __future__ import annotations

import pytest

import wai
from wai._admin import CANCELLABLE_STATES, RETRYABLE_STATES, QueueStats, check_job_id, rejected
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
