"""Worker child for the awa adapter; speaks the worker protocol of ``protocol.py``.

``python bench/worker_awa.py --url URL --concurrency C``: one ``AsyncClient`` with
default settings, a no-op ``Noop`` handler and a ``Ping`` handler that records
``time.time() - t``; ``await client.start([("bench", C)])`` at GO,
``await client.shutdown()`` at STOP. See ``adapter_awa.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time

import awa
from adapter import QUEUE
from adapter_awa import Noop, Ping
from protocol import emit, read_line


async def main() -> None:
    """Connect, wait for GO, run the runtime until STOP, report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    opts = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    handled = 0
    latencies: list[float] = []
    client = awa.AsyncClient(opts.url)

    @client.task(Noop, queue=QUEUE)
    async def noop(job: awa.Job) -> None:
        nonlocal handled
        handled += 1

    @client.task(Ping, queue=QUEUE)
    async def ping(job: awa.Job) -> None:
        nonlocal handled
        latencies.append(time.time() - job.args.t)
        handled += 1

    tx = await client.transaction()  # connect one pooled connection, start nothing
    async with tx:
        await tx.execute("SELECT 1")
    emit("READY")
    if await read_line() != "GO":
        raise SystemExit("expected GO")
    t0 = time.perf_counter()
    await client.start([(QUEUE, opts.concurrency)])
    start_seconds = time.perf_counter() - t0
    if await read_line() != "STOP":
        raise SystemExit("expected STOP")
    t1 = time.perf_counter()
    await client.shutdown()
    shutdown_seconds = time.perf_counter() - t1
    await client.close()
    emit(
        {
            "handled": handled,
            "latencies": latencies,
            "start_seconds": start_seconds,
            "shutdown_seconds": shutdown_seconds,
            "pid": os.getpid(),
        }
    )


if __name__ == "__main__":
    asyncio.run(main())
