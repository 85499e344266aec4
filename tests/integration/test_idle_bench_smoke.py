"""``bench/idle.py`` runs end to end for a minute: the figures are in bench/RESULTS.md.

This checks that the worker starts, the counters are read, the jobs inserted after idle
spells are picked up (the script exits non-zero otherwise), the table comes out, and the
budget holds: an idle worker with the default timings makes at most 2 transactions a
second once its idle loops have backed off (it made 5.5 before they did). The window is
60 s: PostgreSQL's counters reach pg_stat_database up to 10 s late, so the reads that
bound the window can each miss up to ten seconds of a connection's transactions (a 30-s
window once read 2.07 a second for a worker that makes 1.3-1.5).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]


def _idle_run(database_url: str) -> tuple[str, float, int, str]:
    """One run of bench/idle.py: its output, transactions/s, connections, pickups."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "idle.py"), "--database-url", database_url,
         "--dbname", f"wai_idle_smoke_{os.getpid()}", "--seconds", "60", "--warmup", "20",
         "--pickups", "3", "--pickup-idle", "2"],
        capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == (
        "| transactions/s | connections | first pickups after idling (ms): p50, p99, max |"
    )
    rate, connections, pickups = (cell.strip() for cell in rows[1].strip("| ").split(" | "))
    return done.stdout + done.stderr, float(rate), int(connections), pickups


def test_idle_bench_smoke(database_url: str) -> None:
    output, rate, connections, pickups = _idle_run(database_url)
    if rate > 2.0:
        # Measured on a machine the rest of the suite keeps busy: one window once read
        # 2.57 a second (8 connections) where the worker alone makes 1.4 (6). A second
        # window decides; a worker that breaks the budget breaks it in both.
        output, rate, connections, pickups = _idle_run(database_url)
    # the worker's own log (a lost LISTEN connection, say) comes with a failure
    assert 0 < rate <= 2.0, output
    assert connections >= 1
    assert pickups.endswith("(n=3)")
