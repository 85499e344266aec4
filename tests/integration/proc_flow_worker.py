"""A worker process for ``test_flow_processes.py`` (not a test module).

    python tests/integration/proc_flow_worker.py DATABASE_URL QUEUE=N [QUEUE=N ...]
        [--rate QUEUE=LIMIT/PER/BURST] [--global QUEUE=N]
        [--staleness S] [--rescue S] [--election S]

Serves the given queues (``N``: this process's own concurrency) with
:meth:`wai.AsyncClient.run` and small timings until SIGTERM/SIGINT, then shuts down
gracefully and exits 0. ``--rate`` and ``--global`` give a queue's flow control through
its :class:`wai.QueueConfig` (stored in the ``queues`` table when the worker starts); a
queue without either is served with a plain concurrency. Tasks:

- ``flow_tick``: does nothing;
- ``flow_span``: records its attempt in the table ``spans`` (which the test creates) on
  a connection of its own (not in the worker's transaction): a row with the database's
  ``clock_timestamp()`` as ``started`` when the handler starts, ``ended`` set the same way
  just before it returns; in between it sleeps ``seconds``. With ``fail_first`` its first
  attempt returns ``wai.RetryAfter(0.05)`` (after recording its end).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

import wai


@dataclass
class FlowTick:
    n: int = 0


@dataclass
class FlowSpan:
    seconds: float
    key: str = ""
    n: int = 0
    fail_first: bool = False


def build(url: str, side: AsyncConnectionPool[Any]) -> wai.AsyncClient:
    client = wai.AsyncClient(url, max_connections=8)

    @client.task(FlowTick)
    async def flow_tick(job: wai.Job[FlowTick]) -> None:
        return None

    @client.task(FlowSpan)
    async def flow_span(job: wai.Job[FlowSpan]) -> wai.RetryAfter | None:
        async with side.connection() as conn:
            await conn.execute(
                "INSERT INTO spans (job_id, attempt, run_lease, pid, key, n, started)"
                " VALUES (%s, %s, %s, %s, %s, %s, clock_timestamp())",
                (job.id, job.attempt, job.run_lease, os.getpid(), job.args.key, job.args.n),
            )
        await asyncio.sleep(job.args.seconds)
        async with side.connection() as conn:
            await conn.execute(
                "UPDATE spans SET ended = clock_timestamp() WHERE job_id = %s AND run_lease = %s",
                (job.id, job.run_lease),
            )
        if job.args.fail_first and job.attempt == 1:
            return wai.RetryAfter(0.05)
        return None

    return client


def _pairs(values: list[str]) -> dict[str, str]:
    return dict(v.split("=", 1) for v in values)


def configs(
    queues: dict[str, int], rates: dict[str, str], caps: dict[str, str]
) -> dict[str, int | wai.QueueConfig]:
    """Each served queue's concurrency, as a QueueConfig when it has flow control."""
    out: dict[str, int | wai.QueueConfig] = {}
    for name, concurrency in queues.items():
        rate: wai.RateLimit | None = None
        if name in rates:
            limit, per, burst = rates[name].split("/")
            rate = wai.RateLimit(int(limit), per=float(per), burst=int(burst))
        cap = int(caps[name]) if name in caps else None
        if rate is None and cap is None:
            out[name] = concurrency
        else:
            out[name] = wai.QueueConfig(
                concurrency=concurrency, rate_limit=rate, global_concurrency=cap
            )
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("queues", nargs="+", metavar="QUEUE=N")
    parser.add_argument("--rate", action="append", default=[], metavar="QUEUE=L/PER/BURST")
    parser.add_argument("--global", dest="caps", action="append", default=[], metavar="QUEUE=N")
    # generous by default: a loaded machine must not make rescue re-run live jobs
    parser.add_argument("--staleness", type=float, default=30)
    parser.add_argument("--rescue", type=float, default=60)
    parser.add_argument("--election", type=float, default=0.2)
    args = parser.parse_args()
    queues = {name: int(n) for name, n in _pairs(args.queues).items()}

    side: AsyncConnectionPool[Any] = AsyncConnectionPool(
        args.url, min_size=1, max_size=6, kwargs={"autocommit": True}, open=False
    )
    await side.open()
    try:
        async with build(args.url, side) as client:
            await client.run(
                configs(queues, _pairs(args.rate), _pairs(args.caps)),
                poll_interval=0.1,
                heartbeat_interval=0.2,
                heartbeat_staleness=args.staleness,
                rescue_interval=args.rescue,
                promote_interval=0.05,
                election_interval=args.election,
                shutdown_timeout=5,
            )
    finally:
        await side.close()


if __name__ == "__main__":
    asyncio.run(main())
