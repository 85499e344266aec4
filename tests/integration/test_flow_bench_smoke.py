"""``bench/flow.py`` runs end to end for a few seconds: a smoke, not the figures.

The figures are in bench/RESULTS.md; this checks that both kinds of case run over two
worker processes, that their bounds hold (``--bounds-only``: the script exits non-zero
when one is missed; the rate reached in 4 s on a machine busy with the rest of the suite
is not checked) and that the table comes out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def test_flow_bench_smoke(database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "flow.py"), "--database-url", database_url,
         "--dbname", f"wai_flow_smoke_{os.getpid()}", "--processes", "2", "--seconds", "4",
         "--rates", "50", "--global-concurrency", "2", "--bounds-only"],
        capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows[1:]] == [
        "| rate 50/s burst 5",
        "| global concurrency 2, 50 ms jobs",
    ]
    assert all(row.rstrip().endswith("| yes |") for row in rows[1:])
