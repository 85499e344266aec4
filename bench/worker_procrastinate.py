"""Worker child for the procrastinate adapter; speaks the worker protocol of ``protocol.py``.

``python bench/worker_procrastinate.py --url URL --concurrency C``: an ``App`` whose
pool holds 4 to ``C + 4`` connections, the no-op task ``noop(seq, t=None)`` (records
``time.time() - t`` when ``t`` is given) and ``run_worker_async(concurrency=C, ...)``
started at GO and cancelled at STOP. See ``adapter_procrastinate.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import time

from adapter import QUEUE
from adapter_procrastinate import make_app
from protocol import emit, read_line


async def main() -> None:
    """Open the app, wait for GO, run the worker until STOP, report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    opts = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    handled = 0
    latencies: list[float] = []

    def on_job(seq: int, t: float | None) -> None:
        nonlocal handled
        if t is not None:
            latencies.append(time.time() - t)
        handled += 1

    max_size = opts.concurrency + 4
    app = make_app(opts.url, on_job, min_size=4, max_size=max_size)
    await app.open_async()
    pool = app.connector.pool  # type: ignore[attr-defined]
    async with pool.connection() as conn:
        await conn.execute("SELECT 1")
    emit("READY")
    if await read_line() != "GO":
        raise SystemExit("expected GO")
    t0 = time.perf_counter()
    run = asyncio.create_task(
        app.run_worker_async(
            queues=[QUEUE],
            concurrency=opts.concurrency,
            wait=True,
            listen_notify=True,
            install_signal_handlers=False,
        )
    )
    start_seconds = time.perf_counter() - t0
    if await read_line() != "STOP":
        raise SystemExit("expected STOP")
    if run.done():  # it failed
        run.result()
    t1 = time.perf_counter()
    run.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await run
    shutdown_seconds = time.perf_counter() - t1
    stats = pool.get_stats()
    await app.close_async()
    emit(
        {
            "handled": handled,
            "latencies": latencies,
            "start_seconds": start_seconds,
            "shutdown_seconds": shutdown_seconds,
            "settings": {"pool_min": 4, "pool_max": max_size},
            # pool_size at the end is the most connections the pool grew to (it shrinks
            # only after 10 idle minutes); connections_num counts the ones it opened.
            "pool_stats": {
                k: stats.get(k) for k in ("pool_size", "connections_num", "requests_num")
            },
            "pid": os.getpid(),
        }
    )


if __name__ == "__main__":
    asyncio.run(main())
