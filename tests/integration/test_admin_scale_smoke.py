"""``bench/admin_scale.py`` runs end to end on a small table: a smoke, not the figures.

The figures (1,000,000 jobs) are in bench/RESULTS.md; this checks that the script fills,
calls every endpoint it names with a 200 answer, and prints its table.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]


def test_admin_scale_bench_smoke(database_url: str) -> None:
    dbname = f"wai_admin_smoke_{os.getpid()}"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "admin_scale.py"), "--database-url", database_url,
         "--dbname", dbname, "--jobs", "5000", "--dlq", "20", "--repeat", "2",
         "--history-minutes", "60"],
        capture_output=True, text=True, timeout=150, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    names = [row.split(" | ")[0].removeprefix("| ") for row in rows[1:]]
    assert "queue stats" in names
    assert "dashboard (its 6 requests at once)" in names
    assert len(names) >= 15
    assert "worst p95:" in done.stdout
