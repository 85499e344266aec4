"""A worker process for the fault tests (not a test module).

    python -m tests.faults.fault_worker DATABASE_URL QUEUE=N [QUEUE=N ...] --app NAME
        [--heartbeat S] [--staleness S] [--rescue S] [--election S] [--no-maintenance]

Runs from the repository root. Serves the given queues with :meth:`wai.AsyncClient.run`
until SIGTERM/SIGINT, then shuts down gracefully and exits 0. Every connection of the
worker carries ``application_name`` NAME (set through ``PGAPPNAME`` by the caller), and
the handlers' own connections carry ``NAME-side``, so a test can find and terminate
them. SIGUSR1 dumps every thread's stack to stderr, SIGUSR2 every asyncio task's. The tasks are in
:mod:`tests.faults._tasks`.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import logging
import signal
import sys
from typing import Any

from psycopg_pool import AsyncConnectionPool

from tests.faults._tasks import build


def _dump_tasks() -> None:
    for task in asyncio.all_tasks():
        print(f"--- task {task.get_name()}", file=sys.stderr)
        task.print_stack(file=sys.stderr)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("queues", nargs="+", metavar="QUEUE=N")
    parser.add_argument("--app", required=True)
    parser.add_argument("--heartbeat", type=float, default=0.5)
    parser.add_argument("--staleness", type=float, default=1.5)
    parser.add_argument("--rescue", type=float, default=0.5)
    parser.add_argument("--election", type=float, default=0.5)
    parser.add_argument("--no-maintenance", dest="maintenance", action="store_false")
    args = parser.parse_args()
    queues = {name: int(n) for name, n in (q.split("=") for q in args.queues)}
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, _dump_tasks)

    side: AsyncConnectionPool[Any] = AsyncConnectionPool(
        args.url,
        min_size=1,
        max_size=8,
        kwargs={"autocommit": True, "application_name": f"{args.app}-side"},
        open=False,
    )
    await side.open()
    try:
        async with build(args.url, args.app, side) as client:
            await client.run(
                queues,
                poll_interval=0.2,
                heartbeat_interval=args.heartbeat,
                heartbeat_staleness=args.staleness,
                rescue_interval=args.rescue,
                promote_interval=0.1,
                election_interval=args.election,
                maintenance=args.maintenance,
                shutdown_timeout=5,
            )
    finally:
        await side.close()


if __name__ == "__main__":
    asyncio.run(main())
