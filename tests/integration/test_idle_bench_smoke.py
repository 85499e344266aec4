"""``bench/idle.py`` runs end to end for a few seconds: a smoke, not the figures.

The figures are in bench/RESULTS.md; this checks that the worker starts, the counters are
read, the job inserted after the idle spell is picked up (the script exits non-zero
otherwise) and the table comes out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def test_idle_bench_smoke(database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "idle.py"), "--database-url", database_url,
         "--dbname", f"wai_idle_smoke_{os.getpid()}", "--seconds", "3", "--warmup", "1"],
        capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert rows[0] == "| transactions/s | connections | first pickup after the idle spell |"
    rate, connections, pickup = (cell.strip() for cell in rows[1].strip("| ").split(" | "))
    assert float(rate) > 0
    assert int(connections) >= 1
    assert pickup.endswith(" ms")
