"""``bench/plain_loop.py`` runs end to end: every row drained, a figure per batch size.

The figures are in bench/RESULTS.md; this checks that the script fills its table, drains
it (it exits non-zero when a row is left behind) and prints its table.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]


def test_plain_loop_bench_smoke(database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "plain_loop.py"), "--server", database_url,
         "--dbname", f"wai_plain_smoke_{os.getpid()}", "--jobs", "500", "--batch", "32,7",
         "--runs", "1"],
        capture_output=True, text=True, timeout=100, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| claim ")]
    assert [row.split(",")[0] for row in rows] == ["| claim 32", "| claim 7"]
    for row in rows:
        median = row.split(" | ")[1].split(" ")[0]
        assert float(median.replace(",", "")) > 0
