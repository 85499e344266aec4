"""Producer child: runs one adapter's insert calls in the adapter's own environment.

``python bench/producer.py --adapter NAME --url URL``; see ``protocol.py``. Each
command's clock runs inside this process, around the adapter calls only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from importlib import metadata
from typing import Any

from adapter import Adapter, load_adapter
from protocol import emit, read_line


def _dist_version(name: str) -> str | None:
    """The installed version of a distribution, if any."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


async def _latency(adapter: Adapter, count: int, interval: float) -> None:
    """Insert ``count`` timed jobs one at a time on a fixed ``interval`` cadence."""
    start = time.perf_counter()
    for i in range(count):
        delay = start + i * interval - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await adapter.insert_timed(i)


async def _soak(
    adapter: Adapter, start: int, seconds: float, rate: float, batch: int
) -> dict[str, Any]:
    """Insert ``batch`` jobs every ``batch / rate`` s for ``seconds`` s, through the batch API.

    The cadence is fixed: a batch that starts late is not made up by shortening the
    next wait below zero, but the schedule keeps its origin, so a producer that
    falls behind inserts back-to-back until it has caught up (and reports the lag).
    """
    interval = batch / rate
    t0 = time.perf_counter()
    batches = late = 0
    max_lag = 0.0
    seq = start
    while True:
        due = t0 + batches * interval
        if due - t0 >= seconds:
            break
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            lag = -delay
            max_lag = max(max_lag, lag)
            if lag > interval:
                late += 1
        await adapter.insert_batch(seq, batch, batch)
        seq += batch
        batches += 1
    return {
        "inserted": seq - start,
        "batches": batches,
        "late_batches": late,
        "max_lag_s": max_lag,
        "next_seq": seq,
    }


async def main() -> None:
    """Set up, then serve commands until stdin closes."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--url", required=True)
    opts = parser.parse_args()
    adapter = load_adapter(opts.adapter)
    await adapter.setup(opts.url)
    emit(
        {
            "ready": True,
            "version": adapter.version(),
            "origin": adapter.origin(),
            "prefix": sys.prefix,
            "python": platform.python_version(),
            "psycopg": _dist_version("psycopg"),
            "drivers": {d: _dist_version(d) for d in adapter.drivers},
            "pid": os.getpid(),
        }
    )
    try:
        while line := await read_line():
            cmd = json.loads(line)
            t0 = time.perf_counter()
            extra: dict[str, Any] = {}
            match cmd["cmd"]:
                case "insert_single":
                    await adapter.insert_single(cmd["start"], cmd["count"])
                case "insert_batch":
                    await adapter.insert_batch(cmd["start"], cmd["count"], cmd["chunk"])
                case "ping":
                    await adapter.ping()
                case "latency":
                    await _latency(adapter, cmd["count"], cmd["interval"])
                case "soak":
                    extra = await _soak(
                        adapter, cmd["start"], cmd["seconds"], cmd["rate"], cmd["batch"]
                    )
                case other:
                    raise SystemExit(f"unknown command {other!r}")
            emit({"ok": True, "elapsed": time.perf_counter() - t0, **extra})
    finally:
        await adapter.close()


if __name__ == "__main__":
    asyncio.run(main())
