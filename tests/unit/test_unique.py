from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.factories import SendEmail
from wai._inserts import EnqueueRequest, build_job
from wai._job import JobState
from wai._unique import DEFAULT_UNIQUE_STATES, UniqueOpts, unique_key
from wai.errors import ValidationError

NOW = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)


def key(opts: UniqueOpts, *, kind: str = "k", queue: str = "q", args: str = '{"a":1}') -> bytes:
    return unique_key(opts, kind=kind, queue=queue, args_json=args, now=NOW)


def test_unique_key_is_sixteen_stable_bytes() -> None:
    k = key(UniqueOpts())
    assert isinstance(k, bytes)
    assert len(k) == 16
    assert key(UniqueOpts()) == k


def test_unique_key_depends_on_kind() -> None:
    assert key(UniqueOpts(), kind="a") != key(UniqueOpts(), kind="b")


def test_unique_key_by_args_ignores_key_order_and_whitespace() -> None:
    opts = UniqueOpts()
    assert key(opts, args='{"a":1,"b":[1,2]}') == key(opts, args='{ "b": [1, 2], "a": 1 }')
    assert key(opts, args='{"a":1}') != key(opts, args='{"a":2}')


def test_unique_key_without_by_args_ignores_args() -> None:
    opts = UniqueOpts(by_args=False)
    assert key(opts, args='{"a":1}') == key(opts, args='{"a":2}')


def test_unique_key_by_queue() -> None:
    assert key(UniqueOpts(), queue="x") == key(UniqueOpts(), queue="y")
    assert key(UniqueOpts(by_queue=True), queue="x") != key(UniqueOpts(by_queue=True), queue="y")


def test_unique_key_by_period_buckets_time() -> None:
    opts = UniqueOpts(by_period=3600)
    start = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)

    def at(t: datetime) -> bytes:
        return unique_key(opts, kind="k", queue="q", args_json="{}", now=t)

    assert at(start) == at(start + timedelta(minutes=59, seconds=59))
    assert at(start) != at(start + timedelta(hours=1))
    assert at(start) != at(start - timedelta(seconds=1))
    # The period is part of the key: a job unique per hour differs from one unique forever.
    assert at(start) != unique_key(UniqueOpts(), kind="k", queue="q", args_json="{}", now=start)


@pytest.mark.parametrize("period", [0, -1, -0.5, math.nan, math.inf, True, "60"])
def test_unique_key_rejects_bad_periods(period: Any) -> None:
    with pytest.raises(ValidationError, match="by_period must be a finite number"):
        key(UniqueOpts(by_period=period))


def test_unique_key_accepts_fractional_periods() -> None:
    assert key(UniqueOpts(by_period=0.5)) != key(UniqueOpts(by_period=1))


def test_unique_key_rejects_unknown_on_conflict() -> None:
    with pytest.raises(ValidationError, match="on_conflict"):
        key(UniqueOpts(on_conflict="replace"))  # pyright: ignore[reportArgumentType]


def test_default_states_hold_the_key_until_failed_or_cancelled() -> None:
    assert JobState.COMPLETED in DEFAULT_UNIQUE_STATES
    assert JobState.FAILED not in DEFAULT_UNIQUE_STATES
    assert JobState.CANCELLED not in DEFAULT_UNIQUE_STATES
    assert UniqueOpts().state_list() == [s.value for s in DEFAULT_UNIQUE_STATES]


def test_state_list_accepts_strings_and_enums() -> None:
    opts = UniqueOpts(states=["available", JobState.RUNNING])
    assert opts.state_list() == ["available", "running"]


def test_state_list_rejects_unknown_states() -> None:
    with pytest.raises(ValidationError, match=r"UniqueOpts\.states"):
        UniqueOpts(states=["available", "done"]).state_list()


def test_state_list_rejects_empty() -> None:
    with pytest.raises(ValidationError, match="at least one state"):
        UniqueOpts(states=[]).state_list()


def test_build_job_carries_unique_fields() -> None:
    opts = UniqueOpts(states=["available"], on_conflict="skip")
    job = build_job(
        EnqueueRequest(SendEmail(to="a"), unique=opts), default_queue=lambda _k: None, now=NOW
    )
    assert job.unique_key == unique_key(
        opts, kind="send_email", queue="default", args_json=job.args, now=NOW
    )
    assert job.unique_states == ["available"]
    assert job.on_conflict == "skip"


def test_build_job_without_unique_has_no_key() -> None:
    job = build_job(EnqueueRequest(SendEmail(to="a")), default_queue=lambda _k: None)
    assert job.unique_key is None
    assert job.unique_states is None
    assert job.on_conflict == "raise"


def test_build_job_rejects_non_unique_opts() -> None:
    with pytest.raises(ValidationError, match="UniqueOpts"):
        build_job(
            EnqueueRequest(SendEmail(to="a"), unique={"by_args": True}),  # pyright: ignore[reportArgumentType]
            default_queue=lambda _k: None,
        )
