"""What one idle worker process costs the database, and how fast it picks up after idling.

``.venv/bin/python bench/idle.py [--database-url URL] [--seconds 60] [--warmup 10]
[--pickups 10] [--pickup-idle 60] [--followups]``

On a scratch database created and dropped around the run, one worker process (the
``wai worker`` defaults: maintenance on, so it is also the leader; one queue of 10 slots,
no job; with ``--followups`` its task also has a follow-up spec, so the process runs an
outbox sweeper) starts, is left ``--warmup`` seconds, then idles for ``--seconds`` while
this process reads the database's counters. Reports:

- transactions per second of that database (``xact_commit + xact_rollback`` of
  ``pg_stat_database``, less this script's own reads), and the connections the worker
  holds open;
- then the pickup of the first job after an idle spell, ``--pickups`` times: one job is
  inserted and the time from its insert to its attempt's start (``attempted_at``, the
  server's clock) is read, then the worker idles ``--pickup-idle`` seconds before the
  next one. The first follows the measured window; p50, p99 (the nearest rank) and the
  worst of them are reported.

PostgreSQL flushes a backend's counters when it goes idle, at most every second (and an
idle backend's within 10 s), so the window's figure is good to about one flush per
connection: use a window of a minute or more.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from scratch import scratch_database  # noqa: E402

QUEUE = "idle"


@dataclass
class Ping:
    """A job that does nothing."""

    n: int = 0


async def _child(url: str, followups: bool) -> None:
    import wai

    client = wai.AsyncClient(url)

    @client.task(Ping, queue=QUEUE)
    async def ping(job: wai.Job[Ping]) -> None:
        return None

    if followups:
        client.on_rescued_enqueue(Ping, lambda args, job, reason: Ping(args.n + 1), name="again")

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with client:
        await client.start({QUEUE: 10})
        print("ready", flush=True)
        await stop.wait()
        await client.shutdown(timeout=5)


def _counters(conn: psycopg.Connection[tuple[object, ...]], dbname: str) -> int:
    # a new snapshot of the shared statistics at every read
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (dbname,)
    ).fetchone()
    assert row is not None
    return int(str(row[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--url")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("WAI_BENCH_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--dbname", default="wai_bench_idle")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=10.0)
    parser.add_argument("--pickups", type=int, default=10)
    parser.add_argument("--pickup-idle", type=float, default=60.0)
    parser.add_argument(
        "--followups",
        action="store_true",
        help="give the task a follow-up spec (an outbox sweeper)",
    )
    args = parser.parse_args()
    if args.child:
        asyncio.run(_child(args.url, args.followups))
        return
    import wai

    with scratch_database(args.database_url, args.dbname) as url:
        with wai.Client(url) as client:
            client.migrate()
        child = subprocess.Popen(
            [sys.executable, __file__, "--child", "--url", url]
            + (["--followups"] if args.followups else []),
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise SystemExit("the worker did not start")
            time.sleep(args.warmup)
            # this script's reads run on a connection to another database: they count there
            with psycopg.connect(args.database_url, autocommit=True) as stats:
                first = _counters(stats, args.dbname)
                started = time.monotonic()
                time.sleep(args.seconds)
                last = _counters(stats, args.dbname)
                elapsed = time.monotonic() - started
                row = stats.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (args.dbname,)
                ).fetchone()
                connections = int(str(row[0])) if row else 0
            pickups: list[float] = []
            with wai.Client(url) as client:
                for n in range(args.pickups):
                    if n:
                        time.sleep(args.pickup_idle)
                    picked = _pickup(client)
                    if picked is None:
                        break
                    pickups.append(picked)
        finally:
            child.send_signal(signal.SIGTERM)
            child.wait(timeout=60)
    rate = (last - first) / elapsed
    spec = ", a follow-up spec" if args.followups else ""
    print(f"one idle worker, one queue{spec}, {elapsed:.0f} s after {args.warmup:g} s of warm-up\n")
    print("| transactions/s | connections | first pickups after idling (ms): p50, p99, max |")
    print("|---|---|---|")
    if len(pickups) < args.pickups:
        shown = f"a job was not picked up in 30 s ({len(pickups)} were)"
    else:
        ms = sorted(p * 1000 for p in pickups)
        rank = max(1, math.ceil(0.99 * len(ms)))  # nearest rank
        shown = f"{ms[len(ms) // 2]:.1f}, {ms[rank - 1]:.1f}, {ms[-1]:.1f} (n={len(ms)})"
    print(f"| {rate:.2f} | {connections} | {shown} |")
    if len(pickups) < args.pickups:
        raise SystemExit("a job was not picked up")


def _pickup(client: Any) -> float | None:
    """Insert a job; seconds from its insert to its attempt's start (None: not in 30 s)."""
    job = client.insert(Ping(), queue=QUEUE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        row = client.get_job(job.id)
        if row.attempted_at is not None:
            return float((row.attempted_at - row.created_at).total_seconds())
        time.sleep(0.01)
    return None


if __name__ == "__main__":
    main()
