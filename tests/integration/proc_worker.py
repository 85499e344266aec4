"""A worker process for ``test_processes.py`` (not a test module).

    python tests/integration/proc_worker.py DATABASE_URL QUEUE=N [QUEUE=N ...]
        [--staleness S] [--no-maintenance]

Serves the given queues with :meth:`wai.AsyncClient.run` and small timings until
SIGTERM/SIGINT, then shuts down gracefully and exits 0. Tasks:

- ``race`` (queue ``race``): records ``(job_id, pid)`` in the table ``runs``, on a
  connection of its own (not in the worker's transaction);
- ``nap`` (queue ``slow``): sleeps ``seconds``;
- ``quick`` (queue ``fast``): does nothing.
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
class Race:
    n: int


@dataclass
class Nap:
    seconds: float


@dataclass
class Quick:
    n: int = 0


def build(url: str, side: AsyncConnectionPool[Any]) -> wai.AsyncClient:
    client = wai.AsyncClient(url, max_connections=8)

    @client.task(Race, queue="race")
    async def race(job: wai.Job[Race]) -> None:
        async with side.connection() as conn:
            await conn.execute(
                "INSERT INTO runs (job_id, pid) VALUES (%s, %s)", (job.id, os.getpid())
            )

    @client.task(Nap, queue="slow")
    async def nap(job: wai.Job[Nap]) -> None:
        await asyncio.sleep(job.args.seconds)

    @client.task(Quick, queue="fast")
    async def quick(job: wai.Job[Quick]) -> None:
        return None

    return client


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("queues", nargs="+", metavar="QUEUE=N")
    # generous: a loaded machine must not make rescue re-run live jobs in these tests
    parser.add_argument("--staleness", type=float, default=30)
    parser.add_argument("--no-maintenance", dest="maintenance", action="store_false")
    args = parser.parse_args()
    queues = {name: int(n) for name, n in (q.split("=") for q in args.queues)}

    side: AsyncConnectionPool[Any] = AsyncConnectionPool(
        args.url, min_size=1, max_size=8, kwargs={"autocommit": True}, open=False
    )
    await side.open()
    try:
        async with build(args.url, side) as client:
            await client.run(
                queues,
                poll_interval=0.1,
                heartbeat_interval=0.2,
                heartbeat_staleness=args.staleness,
                rescue_interval=60,
                promote_interval=0.05,
                election_interval=0.2,
                maintenance=args.maintenance,
                shutdown_timeout=5,
            )
    finally:
        await side.close()


if __name__ == "__main__":
    asyncio.run(main())
