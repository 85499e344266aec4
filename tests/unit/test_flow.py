"""Flow control's values and the claim loop's waits (pure)."""

from __future__ import annotations

from typing import Any

import pytest

import wai
from wai._flow import GLOBAL_CONCURRENCY_POLL, FlowState, claim_wait, stored_rate_limit


def test_a_rate_limit_refills_at_limit_per_period_and_bursts_a_tenth_by_default() -> None:
    limit = wai.RateLimit(50, per=2.0)
    assert limit.rate == 25.0
    assert limit.capacity == 5
    assert wai.RateLimit(5).capacity == 1  # at least one token
    assert wai.RateLimit(50, burst=10).capacity == 10
    assert str(wai.RateLimit(50, per=1.0, burst=10)) == "50/1s burst 10"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((0,), {}, "rate limit must be an integer 1..1000000"),
        ((True,), {}, "rate limit must be an integer"),
        ((2.5,), {}, "rate limit must be an integer"),
        ((10**7,), {}, "rate limit must be an integer"),
        ((10,), {"per": 0}, "per"),
        ((10,), {"per": -1.0}, "per"),
        ((10,), {"per": float("nan")}, "per"),
        ((10,), {"per": 86_401}, "per must be 0.001..86400"),
        ((10,), {"burst": 0}, "burst must be an integer"),
        ((10,), {"burst": "5"}, "burst must be an integer"),
    ],
)
def test_a_bad_rate_limit_is_refused_with_its_field_named(
    args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(wai.ValidationError, match=message):
        wai.RateLimit(*args, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate_limit": 50}, "rate_limit must be a wai.RateLimit"),
        ({"global_concurrency": 0}, "global_concurrency must be an integer"),
        ({"global_concurrency": True}, "global_concurrency must be an integer"),
        ({"retry_holds_key": "no"}, "retry_holds_key must be True, False or None"),
        ({"kind_rate_limits": [("a", 1)]}, "kind_rate_limits must map kinds"),
        ({"kind_rate_limits": {"a": 5}}, "the rate limit of kind 'a' must be a wai.RateLimit"),
        ({"kind_rate_limits": {"": wai.RateLimit(5)}}, "invalid job kind"),
    ],
)
def test_queue_config_refuses_bad_flow_control(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(wai.ValidationError, match=message):
        wai.QueueConfig(**kwargs)


def test_a_stored_rate_limit_needs_its_three_columns() -> None:
    assert stored_rate_limit(None, None, None) is None
    assert stored_rate_limit(10, 1.0, None) is None
    assert stored_rate_limit(10, 0.5, 3) == wai.RateLimit(10, per=0.5, burst=3)


def state(**kw: Any) -> FlowState:
    base: dict[str, Any] = {
        "rate_limit": None,
        "global_concurrency": None,
        "tokens": None,
        "running": None,
    }
    return FlowState(**{**base, **kw})


def test_an_unlimited_or_full_claim_waits_as_usual() -> None:
    assert claim_wait(None, wanted=10, claimed=3) is None
    limited = state(rate_limit=wai.RateLimit(10), tokens=0.0)
    assert claim_wait(limited, wanted=10, claimed=10) is None


def test_a_claim_that_emptied_the_bucket_waits_for_the_next_whole_token() -> None:
    limited = state(rate_limit=wai.RateLimit(10, per=1.0), tokens=0.25)
    assert claim_wait(limited, wanted=10, claimed=2) == pytest.approx(0.075)
    # a queue with tokens left that claimed less simply had no more jobs
    assert claim_wait(state(rate_limit=wai.RateLimit(10), tokens=3.0), wanted=10, claimed=2) is None


def test_a_claim_capped_by_the_global_concurrency_polls() -> None:
    capped = state(global_concurrency=5, running=5)
    assert claim_wait(capped, wanted=10, claimed=0) == GLOBAL_CONCURRENCY_POLL
    assert claim_wait(state(global_concurrency=5, running=3), wanted=10, claimed=2) is None


def test_an_emptied_kind_bucket_brings_the_claim_back_when_it_refills() -> None:
    assert claim_wait(state(kind_wait=0.02), wanted=10, claimed=1) == 0.02
    both = state(global_concurrency=5, running=5, kind_wait=0.5)
    assert claim_wait(both, wanted=10, claimed=0) == GLOBAL_CONCURRENCY_POLL
