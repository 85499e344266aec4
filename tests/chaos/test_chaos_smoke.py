"""The chaos soak, short: ``bench/chaos.py`` runs and every invariant holds.

A smoke, not the proof: 45 s of load with a fault every ~6 s (each kind about once),
then the drain and the checker, in about 90 s. The 10-minute soak is
``python bench/chaos.py --duration 600`` (docs/reliability.md, "The chaos soak").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults._cluster import bindir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
INVARIANT_ROW = re.compile(r"^(?P<name>\S.*?)\s+(?P<count>\d+)(?P<info> \(info\))?$")


def _table(output: str) -> dict[str, int]:
    """The counted invariants of the table the soak printed: name -> violations."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("invariant "))
    rows: dict[str, int] = {}
    for line in lines[start + 2 :]:
        match = INVARIANT_ROW.match(line.strip())
        if not match:
            break
        if not match["info"]:  # shown for information, not a violation
            rows[match["name"]] = int(match["count"])
    return rows


def test_chaos_soak_smoke_holds_every_invariant() -> None:
    if bindir() is None:
        pytest.skip("PostgreSQL server binaries not found (set WAI_PG_BINDIR)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH")) if p
    )
    done = subprocess.run(
        [sys.executable, "bench/chaos.py", "--duration", "45", "--seed", "20261203"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert "invariant " in done.stdout, output[-6000:]
    table = _table(done.stdout)
    assert len(table) >= 10, output[-6000:]
    assert {name: n for name, n in table.items() if n} == {}, output[-6000:]
    assert done.returncode == 0, output[-6000:]
