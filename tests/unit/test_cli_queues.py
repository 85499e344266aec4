"""``wai queues limit``'s decisions: the limits it stores, from its options and the current ones,
and the rate limit of one kind (``--kind``)."""

from __future__ import annotations

from typing import Any

import pytest

from wai._admin import QueueStats
from wai._flow import RateLimit
from wai.cli._common import UsageError
from wai.cli._main import build_parser
from wai.cli.queues import kind_limit, kind_limit_line, limits_line, merged_limits

CURRENT = QueueStats(
    name="mail",
    paused=False,
    paused_at=None,
    counts={},
    oldest_available_lag=0.0,
    rate_limit=RateLimit(9, per=2.0, burst=3),
    global_concurrency=4,
)


def merged(*options: str, current: QueueStats | None = CURRENT) -> tuple[Any, Any]:
    args = build_parser().parse_args(["queues", "limit", "mail", *options])
    return merged_limits(args, current)


def test_a_limit_no_option_names_keeps_its_current_value() -> None:
    assert merged("--global-concurrency", "7") == (CURRENT.rate_limit, 7)
    assert merged("--rate", "5") == (RateLimit(5), 4)
    assert merged("--no-rate") == (None, 4)
    assert merged("--no-global-concurrency") == (CURRENT.rate_limit, None)
    assert merged("--no-rate", "--no-global-concurrency") == (None, None)
    # a queue not known yet has no limit to keep
    assert merged("--global-concurrency", "7", current=None) == (None, 7)
    assert merged("--rate", "5", current=None) == (RateLimit(5), None)


def test_rate_sets_the_whole_rate_limit_with_its_defaults() -> None:
    assert merged("--rate", "50", "--per", "0.5", "--burst", "10") == (
        RateLimit(50, per=0.5, burst=10),
        4,
    )
    rate, _ = merged("--rate", "50")
    assert (rate.per, rate.capacity) == (1.0, 5)  # not the current per and burst


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ((), "nothing to change"),
        (("--per", "2"), "--per goes with --rate N"),
        (("--burst", "2", "--global-concurrency", "3"), "--burst goes with --rate N"),
        (("--no-rate", "--per", "2"), "--per goes with --rate N"),
    ],
)
def test_options_that_say_nothing_or_half_a_rate_are_usage_errors(
    options: tuple[str, ...], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        merged(*options)


def test_the_line_says_both_limits() -> None:
    assert limits_line("mail", RateLimit(50, burst=10), 5) == (
        "queue 'mail' limits: rate 50/1s burst 10, global concurrency 5"
    )
    assert limits_line("mail", None, None) == (
        "queue 'mail' limits: no rate limit, no global concurrency"
    )


def kind(*options: str) -> RateLimit | None:
    args = build_parser().parse_args(["queues", "limit", "mail", "--kind", "charge", *options])
    return kind_limit(args)


def test_a_kind_gets_a_whole_rate_limit_or_none() -> None:
    assert kind("--rate", "10") == RateLimit(10)
    assert kind("--rate", "10", "--per", "60", "--burst", "3") == RateLimit(10, per=60.0, burst=3)
    assert kind("--no-rate") is None
    limit = kind("--rate", "50")
    assert limit is not None
    assert (limit.per, limit.capacity) == (1.0, 5)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ((), "nothing to change: give --kind KIND with --rate N"),
        (("--global-concurrency", "3"), "--global-concurrency does not go with --kind"),
        (("--rate", "5", "--global-concurrency", "3"), "a kind has only a rate limit"),
        (("--no-rate", "--no-global-concurrency"), "--no-global-concurrency does not go with"),
        (("--per", "2"), "--per goes with --rate N"),
        (("--no-rate", "--burst", "2"), "--burst goes with --rate N"),
    ],
)
def test_a_kind_has_only_a_rate_limit_and_it_is_set_whole(
    options: tuple[str, ...], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        kind(*options)


def test_the_kind_line_says_its_rate_limit() -> None:
    assert kind_limit_line("mail", "charge", RateLimit(10, per=60.0, burst=2)) == (
        "queue 'mail' kind 'charge' limit: rate 10/60s burst 2"
    )
    assert kind_limit_line("mail", "charge", None) == (
        "queue 'mail' kind 'charge' limit: no rate limit"
    )
