"""``bench/observability.py`` runs end to end on a few jobs: a smoke, not the figures.

The figures are in bench/RESULTS.md; this checks that every mode drains every job, that
the traced mode records a span per attempt (the script refuses to report otherwise), and
that the table comes out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def test_observability_bench_smoke(database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "observability.py"), "--database-url", database_url,
         "--dbname", f"wai_obs_smoke_{os.getpid()}", "--jobs", "400", "--runs", "1"],
        capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    modes = [row.split(" | ")[0].removeprefix("| ") for row in rows[1:]]
    assert modes == ["off", "prometheus", "otel", "sampled", "traced"]
    assert "spans 400" in done.stdout or "spans 401" in done.stdout
