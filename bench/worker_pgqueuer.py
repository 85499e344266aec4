"""Worker child for the pgqueuer adapter; speaks the worker protocol of ``protocol.py``.

``python bench/worker_pgqueuer.py --url URL --concurrency C``: one asyncpg connection,
``QueueManager`` with one no-op entrypoint ``noop`` that decodes the JSON args and, when
they carry ``t``, records ``time.time() - t``; ``qm.run(batch_size=C // 2,
max_concurrent_tasks=C)``. Nothing is started before GO. See ``adapter_pgqueuer.py``.

``--window-epoch T --window-seconds S`` (``sustained.py``): one line per window
(``windows.py``) with the jobs handled and the pickup time of each (``time.time() - t`` at
the handler's start) instead of the ``latencies`` list.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import time

import asyncpg
from adapter_pgqueuer import ENTRYPOINT
from pgqueuer import QueueManager
from pgqueuer.models import Job
from pgqueuer.queries import Queries
from protocol import emit, read_line
from windows import Windows


async def main() -> None:
    """Connect, wait for GO, run the queue manager until STOP, report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--window-epoch", type=float, help="sustained.py: the run's epoch")
    parser.add_argument("--window-seconds", type=float, help="sustained.py: window length")
    opts = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    windows: Windows | None = None
    if opts.window_epoch is not None and opts.window_seconds is not None:
        windows = Windows(opts.window_epoch, opts.window_seconds)
    batch_size = max(1, opts.concurrency // 2)

    handled = 0
    latencies: list[float] = []
    conn = await asyncpg.connect(opts.url)
    qm = QueueManager(Queries.from_asyncpg_connection(conn))

    @qm.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        nonlocal handled
        args = json.loads(job.payload or b"{}")
        if "t" in args:
            if windows is None:
                latencies.append(time.time() - args["t"])
            else:
                windows.sample("pickup_ms", 1000 * (time.time() - args["t"]))
                windows.count("handled")
        handled += 1

    await conn.execute("SELECT 1")
    emit("READY")
    if await read_line() != "GO":
        raise SystemExit("expected GO")
    reporter = asyncio.create_task(windows.run()) if windows is not None else None
    t0 = time.perf_counter()
    run = asyncio.create_task(qm.run(batch_size=batch_size, max_concurrent_tasks=opts.concurrency))
    start_seconds = time.perf_counter() - t0
    if await read_line() != "STOP":
        raise SystemExit("expected STOP")
    if reporter is not None:
        reporter.cancel()
    if run.done():  # it failed
        run.result()
    t1 = time.perf_counter()
    qm.shutdown.set()
    await run
    shutdown_seconds = time.perf_counter() - t1
    with contextlib.suppress(Exception):
        await conn.close()
    emit(
        {
            "handled": handled,
            "latencies": latencies,
            "start_seconds": start_seconds,
            "shutdown_seconds": shutdown_seconds,
            "settings": {"batch_size": batch_size, "max_concurrent_tasks": opts.concurrency},
            "pid": os.getpid(),
        }
    )


if __name__ == "__main__":
    asyncio.run(main())
