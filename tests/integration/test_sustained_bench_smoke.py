"""``bench/sustained.py`` runs end to end for about 20 seconds: a smoke, not the figures.

A low fixed rate (no probes), 2-second windows and a held snapshot of 6 seconds against the
test server: the series has a row per window, every phase is labelled, the summary comes
out and the chart is written whenever matplotlib is installed (the ``test`` extra has it).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]


def test_sustained_bench_smoke(database_url: str, tmp_path: Path) -> None:
    out, png = tmp_path / "out", tmp_path / "chart.png"
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "sustained.py"), "--database-url", database_url,
         "--dbname", f"wai_sustained_smoke_{os.getpid()}", "--minutes", "0.4", "--rate", "40",
         "--window", "2", "--warmup", "4", "--hold-snapshot-at", "8",
         "--hold-snapshot-for", "6", "--concurrency", "4", "--out", str(out), "--png", str(png)],
        capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr

    with (out / "series.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 12
    assert [r["phase"] for r in rows] == (
        ["warm-up"] * 2 + ["clean"] * 2 + ["held snapshot"] * 3 + ["after"] * 5
    )
    held = [r for r in rows if r["phase"] == "held snapshot"]
    assert all(r["snapshot_held"] == "1" for r in held)
    assert int(held[-1]["xmin_age"]) > 0  # the snapshot's xmin falls behind
    assert sum(float(r["inserted_per_s"]) for r in rows) > 0
    assert sum(float(r["completed_per_s"]) for r in rows) > 0
    assert sum(float(r["followups_per_s"]) for r in rows) > 0  # every 5th job has one
    assert all(int(r["total_bytes"]) > 0 for r in rows)
    picked = [r for r in rows if int(r["pickups"]) > 0]
    assert picked
    for r in picked:  # the pickup's parts, each at most the whole's largest
        for part in ("insert", "wait", "start"):
            assert 0 <= float(r[f"{part}_part_p99_ms"]) <= float(r["pickup_max_ms"]) + 1
        assert float(r["worker_loop_lag_max_ms"]) >= 0  # the loop watcher ran (NaN if not)

    doc = json.loads((out / "series.json").read_text())
    assert [p["phase"] for p in doc["summary"]["phases"]] == [
        "warm-up", "clean", "held snapshot", "after",
    ]  # fmt: skip
    assert doc["summary"]["plateau"]["span_s"] == pytest.approx(16.0)
    assert len(doc["run"]["held_span_s"]) == 2

    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| phase | seconds | inserted/s |")
    assert [line.split(" | ")[0] for line in table[1:]] == [
        "| warm-up", "| clean", "| held snapshot", "| after",
    ]  # fmt: skip
    assert "plateau check over the last" in done.stdout
    if importlib.util.find_spec("matplotlib") is not None:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert not png.exists()
