"""``bench/bridges.py`` runs end to end on a few inserts: a smoke, not the figures.

The figures are in bench/RESULTS.md; this checks that every way runs, that the script
found every job stored (it refuses to report otherwise), and that the table comes out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def test_bridges_bench_smoke(database_url: str) -> None:
    parts = urlsplit(database_url)
    server = urlunsplit((parts.scheme, parts.netloc, "", parts.query, ""))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "bench")])}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bridges.py"), "--url", server,
         "--inserts", "20", "--rounds", "1"],
        capture_output=True, text=True, timeout=280, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if "jobs/s" in line]
    assert [line.split()[0] for line in lines] == ["1", "2", "3", "4", "5", "6"]
    assert "stored 126 jobs, as expected" in done.stdout
