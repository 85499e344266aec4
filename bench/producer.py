"""Producer child: runs one adapter's insert calls in the adapter's own environment.

``python bench/producer.py --adapter NAME --url URL``; see ``protocol.py``. Each
command's clock runs inside this process, around the adapter calls only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import sys
import time
from importlib import metadata
from typing import Any

from adapter import Adapter, load_adapter
from protocol import emit, read_line
from windows import Windows


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


async def _sustained(
    adapter: Adapter,
    start: int,
    seconds: float,
    rate: float,
    epoch: float,
    window: float,
    chain_every: int,
    tick: float = 0.0,
) -> dict[str, Any]:
    """Insert single timed jobs, job ``i`` due at ``epoch + i / rate``, until ``epoch + seconds``.

    With ``tick`` > 0, every ``tick`` seconds the jobs due by then go in one batch call
    (``insert_timed_many``) instead: a rate one insert per transaction cannot offer.

    One insert at a time, each its own transaction (``insert_timed``; every
    ``chain_every``-th job through ``insert_chained`` when ``chain_every`` > 0). The
    schedule keeps its origin: a late insert is not dropped, the producer inserts
    back-to-back until it has caught up; but it stops at ``epoch + seconds`` whatever is
    still due (``behind_at_end``). Each window of ``window`` s is reported as it ends
    (``windows.py``): jobs inserted, the insert call's duration and the largest lag behind
    the schedule.
    """
    windows = Windows(epoch, window)
    reporter = asyncio.create_task(windows.run())
    # the schedule on the monotonic clock, anchored to the wall-clock epoch once
    origin = time.perf_counter() + (epoch - time.time())
    i = 0
    max_lag = 0.0
    total = math.ceil(seconds * rate)
    try:
        while tick > 0:
            now = time.perf_counter()
            if now - origin >= seconds:
                break
            target = min(total, math.floor((now - origin) * rate) + 1)
            if target > i:
                lag = max(0.0, now - (origin + i / rate))
                max_lag = max(max_lag, lag)
                windows.peak("lag_s", lag)
                t = time.perf_counter()
                await adapter.insert_timed_many(range(start + i, start + target), chain_every)
                windows.sample("insert_ms", 1000 * (time.perf_counter() - t))
                windows.count("inserted", target - i)
                if chain_every:
                    chained = sum(
                        1 for s in range(start + i, start + target) if s % chain_every == 0
                    )
                    windows.count("chained", chained)
                i = target
            await asyncio.sleep(max(0.0, tick - (time.perf_counter() - now)))
        while tick <= 0:
            due = origin + i / rate
            if due - origin >= seconds or time.perf_counter() - origin >= seconds:
                break
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            lag = max(0.0, time.perf_counter() - due)
            max_lag = max(max_lag, lag)
            windows.peak("lag_s", lag)
            seq = start + i
            t = time.perf_counter()
            if chain_every and seq % chain_every == 0:
                await adapter.insert_chained(seq)
                windows.count("chained")
            else:
                await adapter.insert_timed(seq)
            windows.sample("insert_ms", 1000 * (time.perf_counter() - t))
            windows.count("inserted")
            i += 1
    finally:
        reporter.cancel()
    windows.flush(windows.index() + 1)
    return {
        "inserted": i,
        "behind_at_end": max(0, math.ceil(seconds * rate) - i),
        "max_lag_s": max_lag,
        "next_seq": start + i,
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
                case "prepare_concurrent":
                    await adapter.prepare_concurrent(cmd["producers"], cmd["group_commit"])
                case "insert_concurrent":
                    await adapter.insert_concurrent(cmd["start"], cmd["count"], cmd["producers"])
                case "ping":
                    await adapter.ping()
                case "latency":
                    await _latency(adapter, cmd["count"], cmd["interval"])
                case "soak":
                    extra = await _soak(
                        adapter, cmd["start"], cmd["seconds"], cmd["rate"], cmd["batch"]
                    )
                case "sustained":
                    extra = await _sustained(
                        adapter,
                        cmd["start"],
                        cmd["seconds"],
                        cmd["rate"],
                        cmd["epoch"],
                        cmd["window"],
                        cmd["chain_every"],
                        cmd.get("tick", 0.0),
                    )
                case other:
                    raise SystemExit(f"unknown command {other!r}")
            emit({"ok": True, "elapsed": time.perf_counter() - t0, **extra})
    finally:
        await adapter.close()


if __name__ == "__main__":
    asyncio.run(main())
