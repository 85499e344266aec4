"""``wai._health``: the ready/live decision of ``client.health()``, and the loop-lag window."""

from __future__ import annotations

import dataclasses
import itertools
import math
from datetime import UTC, datetime

import pytest

from wai._health import (
    LAG_WINDOW,
    LOOP_LAG_LIMIT,
    DatabaseCheck,
    Health,
    LoopLag,
    RuntimeHealth,
    assess,
    check_timeout,
    first_line,
)
from wai.errors import ValidationError

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
SHIPPED = [1, 2, 3, 4]

DATABASES = {
    "current": DatabaseCheck(True, frozenset(SHIPPED), None, 0.002),
    "ahead": DatabaseCheck(True, frozenset([*SHIPPED, 5]), None, 0.002),
    "pending": DatabaseCheck(True, frozenset([1, 2]), None, 0.003),
    "unmigrated": DatabaseCheck(True, frozenset(), None, 0.003),
    "unreadable": DatabaseCheck(True, None, "permission denied for schema wai", 0.004),
    "down": DatabaseCheck(False, None, "connection refused", 0.001),
}

HEALTHY = RuntimeHealth(
    instance_id="i-1",
    running=True,
    stopping=False,
    claimers={"emails": True, "reports": True},
    leader=True,
    in_flight=3,
    background={"finalizer": True, "heartbeat": True, "hooks": True},
    listening=True,
    loop_lag=0.01,
)

RUNTIMES: dict[str, RuntimeHealth | None] = {
    "none": None,
    "healthy": HEALTHY,
    "starting": dataclasses.replace(HEALTHY, running=False),
    "stopping": dataclasses.replace(
        HEALTHY, running=False, stopping=True, claimers={"emails": False, "reports": False}
    ),
    "claimer dead": dataclasses.replace(HEALTHY, claimers={"emails": False, "reports": True}),
    "loop dead": dataclasses.replace(
        HEALTHY, background={"finalizer": False, "heartbeat": True, "hooks": True}
    ),
    "lagging": dataclasses.replace(HEALTHY, loop_lag=LOOP_LAG_LIMIT + 0.5),
    "lagging at the limit": dataclasses.replace(HEALTHY, loop_lag=LOOP_LAG_LIMIT),
    "listen down": dataclasses.replace(HEALTHY, listening=False),
    "no queues": dataclasses.replace(HEALTHY, claimers={}, listening=None, leader=False),
}


def _assess(db: str, rt: str) -> Health:
    return assess(
        DATABASES[db], schema="wai", migrations=SHIPPED, runtime=RUNTIMES[rt], checked_at=NOW
    )


@pytest.mark.parametrize(("db", "rt"), list(itertools.product(DATABASES, RUNTIMES)))
def test_every_combination_follows_the_rules(db: str, rt: str) -> None:
    health = _assess(db, rt)
    database_ok = db in ("current", "ahead")
    runtime_ok = rt in ("none", "healthy", "listen down", "no queues", "lagging at the limit")
    runtime_dead = rt in ("claimer dead", "loop dead", "lagging")
    assert health.database is (db != "down")
    assert health.schema_current is database_ok
    assert health.ready is (database_ok and runtime_ok)
    # A database outage or an unmigrated schema is no reason to restart the process.
    assert health.live is (not runtime_dead)
    assert (health.problems == ()) is (health.ready and health.live)
    assert health.runtime is RUNTIMES[rt]
    assert health.checked_at == NOW
    assert health.latency == DATABASES[db].latency


def test_healthy_client_without_runtime() -> None:
    health = _assess("current", "none")
    assert health == Health(
        ready=True,
        live=True,
        database=True,
        schema_current=True,
        pending_migrations=(),
        runtime=None,
        problems=(),
        checked_at=NOW,
        latency=0.002,
    )


def test_unreachable_database_says_why_and_has_no_pending_list() -> None:
    health = _assess("down", "none")
    assert health.problems == ("database unreachable: connection refused",)
    assert health.pending_migrations == ()
    assert not health.schema_current


def test_pending_migrations_are_listed_in_order() -> None:
    health = _assess("pending", "none")
    assert health.pending_migrations == (3, 4)
    assert health.problems == ("schema 'wai' lacks migrations [3, 4]",)


def test_unmigrated_schema_lacks_everything() -> None:
    health = _assess("unmigrated", "none")
    assert health.pending_migrations == (1, 2, 3, 4)
    assert not health.ready


def test_a_schema_ahead_of_this_version_is_current() -> None:
    # A newer deployment migrated further: every migration this one ships is there.
    health = _assess("ahead", "none")
    assert health.schema_current
    assert health.pending_migrations == ()


def test_unreadable_ledger_says_so() -> None:
    health = _assess("unreadable", "none")
    assert health.database
    assert health.problems == (
        "cannot read the migrations of schema 'wai': permission denied for schema wai",
    )


def test_dead_claimer_names_its_queue() -> None:
    health = _assess("current", "claimer dead")
    assert health.problems == ("queue 'emails' claimer stopped",)
    assert not health.ready
    assert not health.live


def test_dead_background_loop_names_it() -> None:
    health = _assess("current", "loop dead")
    assert health.problems == ("background loop 'finalizer' stopped",)


def test_shutdown_is_unready_but_live_and_its_ended_claimers_are_no_problem() -> None:
    health = _assess("current", "stopping")
    assert health.problems == ("worker runtime is shutting down",)
    assert health.live
    assert not health.ready


def test_starting_runtime_is_not_ready_yet() -> None:
    health = _assess("current", "starting")
    assert health.problems == ("worker runtime is starting",)
    assert health.live


def test_loop_lag_beyond_the_limit_is_neither_live_nor_ready() -> None:
    health = _assess("current", "lagging")
    assert health.problems == (
        f"event loop lagging: a tick ran {LOOP_LAG_LIMIT + 0.5:.1f} s late "
        f"(limit {LOOP_LAG_LIMIT:g} s)",
    )


def test_loop_lag_limit_is_a_parameter() -> None:
    health = assess(
        DATABASES["current"],
        schema="wai",
        migrations=SHIPPED,
        runtime=dataclasses.replace(HEALTHY, loop_lag=0.2),
        checked_at=NOW,
        max_loop_lag=0.1,
    )
    assert not health.live


def test_problems_come_database_first_then_runtime() -> None:
    health = _assess("down", "claimer dead")
    assert health.problems == (
        "database unreachable: connection refused",
        "queue 'emails' claimer stopped",
    )


def test_every_dead_loop_is_a_problem_of_its_own() -> None:
    runtime = dataclasses.replace(
        HEALTHY,
        claimers={"a": False, "b": False},
        background={"heartbeat": False},
        loop_lag=LOOP_LAG_LIMIT * 2,
    )
    health = assess(
        DATABASES["pending"], schema="jobs", migrations=SHIPPED, runtime=runtime, checked_at=NOW
    )
    assert health.problems == (
        "schema 'jobs' lacks migrations [3, 4]",
        "queue 'a' claimer stopped",
        "queue 'b' claimer stopped",
        "background loop 'heartbeat' stopped",
        f"event loop lagging: a tick ran {LOOP_LAG_LIMIT * 2:.1f} s late "
        f"(limit {LOOP_LAG_LIMIT:g} s)",
    )


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, True, "2"])
def test_timeout_must_be_positive_and_finite(bad: object) -> None:
    with pytest.raises(ValidationError, match="timeout"):
        check_timeout(bad)  # pyright: ignore[reportArgumentType]


def test_timeout_accepts_int_and_float() -> None:
    assert check_timeout(2) == 2.0
    assert check_timeout(0.25) == 0.25


def test_first_line_drops_the_hint_lines() -> None:
    exc = OSError('connection to server at "x" failed: Connection refused\n\tIs the server up?')
    assert first_line(exc) == 'connection to server at "x" failed: Connection refused'
    assert first_line(TimeoutError()) == "TimeoutError"


# -- LoopLag: times are passed in, nothing sleeps ----------------------------------------


def test_loop_lag_is_zero_before_any_tick() -> None:
    assert LoopLag().worst(100.0) == 0.0


def test_loop_lag_keeps_the_worst_tick_within_the_window() -> None:
    lag = LoopLag(window=10.0)
    lag.expect(100.5)
    lag.ticked(100.5)
    lag.expect(101.0)
    lag.ticked(104.0)  # three seconds late
    lag.expect(104.5)
    lag.ticked(104.6)
    assert lag.worst(104.6) == pytest.approx(3.0)
    assert lag.worst(113.9) == pytest.approx(3.0)  # 9.9 s after it
    assert lag.worst(114.1) == pytest.approx(0.1)  # out of the window; the 0.1 s tick stays


def test_loop_lag_counts_a_tick_overdue_now() -> None:
    # A loop blocked right now has not run its tick: the wait so far is its lag.
    lag = LoopLag()
    lag.expect(50.0)
    assert lag.worst(49.0) == 0.0
    assert lag.worst(57.5) == pytest.approx(7.5)


def test_loop_lag_early_tick_is_not_negative() -> None:
    lag = LoopLag()
    lag.expect(10.0)
    lag.ticked(9.9)
    assert lag.worst(9.9) == 0.0


def test_loop_lag_forgets_old_ticks() -> None:
    lag = LoopLag(window=LAG_WINDOW)
    for i in range(1000):
        lag.expect(float(i))
        lag.ticked(i + 0.25)
    assert len(lag._late) <= LAG_WINDOW + 1  # pyright: ignore[reportPrivateUsage]
    assert lag.worst(1000.0) == pytest.approx(0.25)
