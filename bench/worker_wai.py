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

``--window-epoch T --window-seconds S`` (``sustained.py``): the worker also serves
``Chained`` jobs, whose completion enqueues one ``Done`` follow-up
(``on_completed_enqueue``), and writes one line per window (``windows.py``): ``Ping`` and
``Chained`` jobs handled, follow-ups handled, and the pickup time of each job handled
(``time.time() - t`` at the handler's start) instead of the ``latencies`` list, with its
three parts (:func:`record_pickup`).
``--completed-retention S``, ``--cleanup-interval S`` and ``--reindex-interval S`` go to
``client.start``.
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
from wai_jobs import Chained, Done, Noop, Ping
from windows import Windows

import wai
from wai.worker._heap import freeze_startup_heap


def record_pickup(windows: Windows, job: wai.Job[Any], t: float) -> None:
    """Sample a job's pickup time and its parts, as ``sustained.py``'s columns show them.

    The parts, by the server's clock of the same machine: ``insert`` from ``t`` to the
    insert's transaction start (``created_at``), ``wait`` from there to the claim's
    transaction start (``attempted_at``: the insert's commit, the wakeup, the claim's
    turn), ``start`` from there to the handler's start (the claim statement, its rows,
    the dispatch to a slot).
    """
    now = time.time()
    created = job.created_at.timestamp()
    attempted = job.attempted_at.timestamp() if job.attempted_at is not None else now
    windows.sample("pickup_ms", 1000 * (now - t))
    windows.sample("insert_part_ms", 1000 * (created - t))
    windows.sample("wait_part_ms", 1000 * (attempted - created))
    windows.sample("start_part_ms", 1000 * (now - attempted))


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
    parser.add_argument("--window-epoch", type=float, help="sustained.py: the run's epoch")
    parser.add_argument("--window-seconds", type=float, help="sustained.py: window length")
    parser.add_argument("--completed-retention", type=float, help="client.start setting (s)")
    parser.add_argument("--cleanup-interval", type=float, help="client.start setting (s)")
    parser.add_argument("--reindex-interval", type=float, help="client.start setting (s)")
    opts = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    windows: Windows | None = None
    if opts.window_epoch is not None and opts.window_seconds is not None:
        windows = Windows(opts.window_epoch, opts.window_seconds)
    runtime: dict[str, float] = {}
    if opts.completed_retention is not None:
        runtime["completed_retention"] = opts.completed_retention
    if opts.cleanup_interval is not None:
        runtime["cleanup_interval"] = opts.cleanup_interval
    if opts.reindex_interval is not None:
        runtime["reindex_interval"] = opts.reindex_interval

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

    if opts.followups or windows is not None:

        @client.task(Done, queue=QUEUE)
        async def done(job: wai.Job[Done]) -> None:
            nonlocal handled
            handled += 1
            if windows is not None:
                windows.count("followups")

    if opts.followups:
        client.on_completed_enqueue(Noop, lambda args, job: Done(seq=args.seq), name="done")

    @client.task(Ping, queue=QUEUE)
    async def ping(job: wai.Job[Ping]) -> None:
        nonlocal handled
        if windows is None:
            latencies.append(time.time() - job.args.t)
        else:
            record_pickup(windows, job, job.args.t)
            windows.count("handled")
        handled += 1

    if windows is not None:
        sampled = windows

        @client.task(Chained, queue=QUEUE)
        async def chained(job: wai.Job[Chained]) -> None:
            nonlocal handled
            record_pickup(sampled, job, job.args.t)
            sampled.count("handled")
            handled += 1

        client.on_completed_enqueue(Chained, lambda args, job: Done(seq=args.seq), name="done")

    await client.open()
    await client.pool.wait()  # connected (min_size connections), nothing started
    async with client._connection() as conn:
        await conn.execute("SELECT 1")
    freeze_startup_heap()  # as `wai worker` does once connected
    emit("READY")
    if await read_line() != "GO":
        raise SystemExit("expected GO")
    profiler = _profiler()
    reporter = asyncio.create_task(windows.run()) if windows is not None else None
    t0 = time.perf_counter()
    await client.start({QUEUE: opts.concurrency}, **runtime)
    start_seconds = time.perf_counter() - t0
    if await read_line() != "STOP":
        raise SystemExit("expected STOP")
    if reporter is not None:
        reporter.cancel()
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
