"""Worker child for the wai adapter; speaks the worker protocol of ``protocol.py``.

``python bench/worker_wai.py --url URL --concurrency C``: one ``AsyncClient``
with default settings, a no-op ``Noop`` handler and a ``Ping`` handler that
records ``time.time() - t``. Nothing is started before GO.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import time

from adapter import QUEUE
from protocol import emit, read_line
from wai_jobs import Done, Noop, Ping

import wai


async def main() -> None:
    """Connect, wait for GO, run the workers until STOP, report."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument(
        "--followups",
        action="store_true",
        help="every Noop enqueues one Done follow-up with its completion",
    )
    opts = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    handled = 0
    latencies: list[float] = []
    client = wai.AsyncClient(opts.url)

    @client.task(Noop, queue=QUEUE)
    async def noop(job: wai.Job[Noop]) -> None:
        nonlocal handled
        handled += 1

    if opts.followups:

        @client.task(Done, queue=QUEUE)
        async def done(job: wai.Job[Done]) -> None:
            nonlocal handled
            handled += 1

        client.on_completed_enqueue(Noop, lambda args, job: Done(seq=args.seq), name="done")

    @client.task(Ping, queue=QUEUE)
    async def ping(job: wai.Job[Ping]) -> None:
        nonlocal handled
        latencies.append(time.time() - job.args.t)
        handled += 1

    await client.open()
    await client.pool.wait()  # connected (min_size connections), nothing started
    async with client.connection() as conn:
        await conn.execute("SELECT 1")
    emit("READY")
    if await read_line() != "GO":
        raise SystemExit("expected GO")
    t0 = time.perf_counter()
    await client.start({QUEUE: opts.concurrency})
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
