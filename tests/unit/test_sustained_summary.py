"""The sustained run's plateau check tells a growing size from a flat or a falling one."""

from __future__ import annotations

from typing import Any

import pytest
from bench import sustained


def _rows(mib: list[float]) -> list[dict[str, Any]]:
    """One 'after' window per 10 s with the given sizes; every other figure constant."""
    return [
        {
            "phase": "after",
            "start_s": 10.0 * i,
            "end_s": 10.0 * (i + 1),
            "inserted_per_s": 100.0,
            "completed_per_s": 100.0,
            "followups_per_s": 0.0,
            "pickup_p50_ms": 1.0,
            "pickup_p99_ms": 2.0,
            "pickup_max_ms": 3.0,
            "backlog": 0,
            "total_bytes": size * 2**20,
            "dead_tup": 0,
            "autovacuum_queue": 0,
            "producer_lag_max_s": 0.0,
            "machine_cpu_pct": 50.0,
        }
        for i, size in enumerate(mib)
    ]


@pytest.mark.parametrize(
    ("sizes", "flat", "growing", "words"),
    [
        ([100.0 + i for i in range(30)], False, True, "still growing"),
        ([100.0] * 30, True, False, "flat"),
        ([400.0 - 10 * i for i in range(30)], False, False, "shrinking"),
    ],
)
def test_the_plateau_check_names_the_trend(
    sizes: list[float], flat: bool, growing: bool, words: str
) -> None:
    summary = sustained.summarize(_rows(sizes), minutes=5)
    assert (summary["plateau"]["flat"], summary["plateau"]["growing"]) == (flat, growing)
    assert words in sustained.report(summary)


def test_the_backlog_is_inserted_less_started_up_to_the_window() -> None:
    prod = {
        0: {"counts": {"inserted": 100}},
        1: {"counts": {"inserted": 100, "chained": 20}},
        2: {"counts": {"inserted": 50}},
    }
    work = {0: {"counts": {"handled": 60}}, 1: {"counts": {"handled": 120, "followups": 20}}}
    assert sustained.backlog(prod, work, 0) == 40
    assert sustained.backlog(prod, work, 1) == 20
    # the worker's window 2 has not arrived yet: its jobs count as waiting
    assert sustained.backlog(prod, work, 2) == 70
    # a job started before its insert call returned is not a negative backlog
    assert (
        sustained.backlog({0: {"counts": {"inserted": 5}}}, {0: {"counts": {"handled": 6}}}, 0) == 0
    )
