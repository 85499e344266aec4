"""Operator-action checks and models without a database: ids, messages, stats, payloads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import wai
from wai._admin import (
    CANCELLABLE_STATES,
    EXACT_COUNT_LIMIT,
    FINISHED_STATES,
    MAX_SEARCH,
    RETRYABLE_STATES,
    JobSearch,
    QueueStats,
    check_job_id,
    check_time_range,
    counts_finished_exactly,
    like_pattern,
    parse_search,
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


# -- job list filters: search text and time range --------------------------------------


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("send", "%send%"),
        ("Send_Email", "%send\\_email%"),
        ("50%", "%50\\%%"),
        ("a\\b", "%a\\\\b%"),
        ("%_\\", "%\\%\\_\\\\%"),
        ("ÉTÉ", "%ÉtÉ%"),  # ASCII letters only: the kind is lower-cased in the C collation
    ],
)
def test_like_pattern_escapes_wildcards_and_folds_ascii_case(text: str, pattern: str) -> None:
    assert like_pattern(text) == pattern


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("billing", JobSearch(job_id=None, pattern="%billing%")),
        ("123", JobSearch(job_id=123, pattern="%123%")),
        ("#123", JobSearch(job_id=123, pattern="%123%")),
        ("007", JobSearch(job_id=7, pattern="%007%")),
        ("0", JobSearch(job_id=None, pattern="%0%")),  # no job has id 0
        ("9223372036854775807", JobSearch(job_id=2**63 - 1, pattern="%9223372036854775807%")),
        ("9223372036854775808", JobSearch(job_id=None, pattern="%9223372036854775808%")),
        ("12345678901234567890", JobSearch(job_id=None, pattern="%12345678901234567890%")),
        ("-5", JobSearch(job_id=None, pattern="%-5%")),
        (" 12", JobSearch(job_id=None, pattern="% 12%")),  # taken as it is
        ("\uff11\uff12", JobSearch(job_id=None, pattern="%\uff11\uff12%")),  # not ASCII digits
        ("#", JobSearch(job_id=None, pattern="%#%")),
    ],
)
def test_parse_search(text: str, expected: JobSearch) -> None:
    assert parse_search(text) == expected


def test_parse_search_none_is_no_search() -> None:
    assert parse_search(None) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "1 to 200 characters, got 0"),
        ("x" * (MAX_SEARCH + 1), "1 to 200 characters, got 201"),
        ("x" * 10_000_000, "got 10000000"),
        ("a\x00b", "search: contains a NUL byte"),
        ("\ud800", "search: contains a lone surrogate"),
        (12, "search must be a string, got int"),
        (b"send", "search must be a string, got bytes"),
    ],
)
def test_parse_search_refuses_what_cannot_be_searched(value: object, message: str) -> None:
    with pytest.raises(wai.ValidationError, match=message):
        parse_search(value)


def test_check_time_range_takes_aware_datetimes() -> None:
    now = datetime.now(UTC)
    paris = timezone(timedelta(hours=1))
    assert check_time_range(None, None) == (None, None)
    assert check_time_range(now, None) == (now, None)
    assert check_time_range(None, now) == (None, now)
    earlier = (now - timedelta(seconds=1)).astimezone(paris)
    assert check_time_range(earlier, now) == (earlier, now)


@pytest.mark.parametrize(
    ("after", "before", "message"),
    [
        (datetime(2026, 1, 1), None, "created_after must be timezone-aware"),
        (None, datetime(2026, 1, 1), "created_before must be timezone-aware"),
        (
            "2026-01-01T00:00:00Z",
            None,
            "created_after must be a datetime with a time zone, got str",
        ),
        (None, 1767225600, "created_before must be a datetime with a time zone, got int"),
        (
            datetime(2026, 1, 2, tzinfo=UTC),
            datetime(2026, 1, 1, tzinfo=UTC),
            "must be earlier than created_before",
        ),
        (  # the same instant in two zones: an empty range
            datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))),
            datetime(2026, 1, 1, tzinfo=UTC),
            "must be earlier than created_before",
        ),
    ],
)
def test_check_time_range_refuses_naive_and_empty_ranges(
    after: object, before: object, message: str
) -> None:
    with pytest.raises(wai.ValidationError, match=message):
        check_time_range(after, before)
