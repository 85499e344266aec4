"""Worker child for the wai adapter; speaks the worker protocol of ``protocol.py``.

``python bench/worker_wai.py --url URL --concurrency C``: one ``AsyncClient``
with default settings, a no-op ``Noop`` handler and a ``Ping`` handler that
records ``time.time() - t``. Nothing is started before GO.

With ``BENCH_PYINSTRUMENT=DIR`` in the environment (``bench/profile.py --pyinstrument``)
the process is profiled with pyinstrument from GO to STOP, and the text report is
written to ``DIR/wai-worker-<pid>.txt``.

``--cpu-ms X`` (the ``cpu2`` workload) replaces the no-op ``Noop`` handler by one that
busy-loops on ``time.perf_counter()`` for X ms: an ``async def`` handler by default, so
the CPU is burnt in the event loop, or with ``--sync-handler`` a plain ``def`` handler,
which wai runs in its thread pool (holding the GIL while it spins).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

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
    parser.add_argument(
        "--cpu-ms", type=float, default=0.0, help="busy-loop this long in each Noop handler"
    )
    parser.add_argument(
        "--sync-handler",
        action="store_true",
        help="with --cpu-ms: a sync (thread pool) handler instead of an async one",
    )
    opts = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    handled = 0
    latencies: list[float] = []
    client = wai.AsyncClient(opts.url)
    burn = opts.cpu_ms / 1000.0
    lock = threading.Lock()

    if burn <= 0:

        @client.task(Noop, queue=QUEUE)
        async def noop(job: wai.Job[Noop]) -> None:
            nonlocal handled
            handled += 1

    elif opts.sync_handler:

        @client.task(Noop, queue=QUEUE)
        def noop_sync_cpu(job: wai.Job[Noop]) -> None:
            nonlocal handled
            end = time.perf_counter() + burn
            while time.perf_counter() < end:
                pass
            with lock:  # handlers run on several threads of the pool
                handled += 1

    else:

        @client.task(Noop, queue=QUEUE)
        async def noop_cpu(job: wai.Job[Noop]) -> None:
            nonlocal handled
            end = time.perf_counter() + burn
            while time.perf_counter() < end:
                pass
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
    async with client._connection() as conn:
        await conn.execute("SELECT 1")
    emit("READY")
    if await read_line() != "GO":
        raise SystemExit("expected GO")
    profiler = _profiler()
    t0 = time.perf_counter()
    await client.start({QUEUE: opts.concurrency})
    start_seconds = time.perf_counter() - t0
    if await read_line() != "STOP":
        raise SystemExit("expected STOP")
    t1 = time.perf_counter()
    await client.shutdown()
    shutdown_seconds = time.perf_counter() - t1
    if profiler is not None:
        profiler.stop()
        out = Path(os.environ["BENCH_PYINSTRUMENT"]) / f"wai-worker-{os.getpid()}.txt"
        out.write_text(profiler.output_text(unicode=True, show_all=False))
    await client.close()
    emit(
        {
            "handled": handled,
            "latencies": latencies,
            "start_seconds": start_seconds,
            "shutdown_seconds": shutdown_seconds,
            "cpu_ms": opts.cpu_ms,
            "sync_handler": opts.sync_handler,
            "pid": os.getpid(),
        }
    )


def _profiler() -> Any:
    """A started pyinstrument profiler when BENCH_PYINSTRUMENT names a directory."""
    if not os.environ.get("BENCH_PYINSTRUMENT"):
        return None
    from pyinstrument import Profiler  # the bench extra: pip install -e '.[bench]'

    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()
    return profiler


if __name__ == "__main__":
    asyncio.run(main())
