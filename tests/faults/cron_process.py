"""A maintenance-only process with one periodic schedule, for the fault tests (not a test).

    python -m tests.faults.cron_process DATABASE_URL --app NAME
        [--election S] [--cron S] [--expr EXPR]

Runs from the repository root. Registers the schedule ``tick`` (``--expr``, by default
``* * * * * *``: every second; kind ``tick``, queue ``cron``, policy ``catch_up``) and
runs :meth:`wai.AsyncClient.run` with no queues: leader election and the maintenance
services only, the cron firer every ``--cron`` seconds. Until SIGTERM/SIGINT, then it
shuts down gracefully and exits 0.

Once its runtime record exists it prints ``READY pid=PID instance=INSTANCE_ID`` (the
instance id is also its leader id in ``wai.leader``). Every connection carries
``application_name`` NAME (set through ``PGAPPNAME`` by the caller). The log shows its
elections and every cron pass that fired or lost a schedule. SIGUSR1 dumps every
thread's stack to stderr, SIGUSR2 every asyncio task's.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import logging
import os
import signal
import sys

import wai

SCHEDULE = "tick"


class _CronPasses(logging.Filter):
    """Keep INFO and above, and the debug lines of cron passes that did something."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.INFO:
            return True
        args = record.args
        if not isinstance(args, tuple) or len(args) != 2 or args[0] != "CronFirer":
            return False
        result = args[1]
        return bool(getattr(result, "fired", None) or getattr(result, "lost", None))


def _dump_tasks() -> None:
    for task in asyncio.all_tasks():
        print(f"--- task {task.get_name()}", file=sys.stderr)
        task.print_stack(file=sys.stderr)


async def _announce(client: wai.AsyncClient) -> None:
    """Print READY once this process's runtime record exists (``start`` has returned)."""
    pid = os.getpid()
    while True:
        try:
            mine = [i for i in await client.list_runtime_instances() if i.pid == pid]
        except Exception as exc:  # the pool may still be warming up: try again
            print(f"waiting for the runtime record: {exc!r}", file=sys.stderr)
            mine = []
        if mine:
            print(f"READY pid={pid} instance={mine[0].instance_id}", flush=True)
            return
        await asyncio.sleep(0.05)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--app", required=True)
    parser.add_argument("--election", type=float, default=0.3)
    parser.add_argument("--cron", type=float, default=0.2)
    parser.add_argument("--expr", default="* * * * * *")
    args = parser.parse_args()
    handler = logging.StreamHandler()
    handler.addFilter(_CronPasses())
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    logging.getLogger("wai.maintenance").setLevel(logging.DEBUG)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, _dump_tasks)

    async with wai.AsyncClient(args.url, max_connections=4) as client:
        client.periodic(
            SCHEDULE,
            args.expr,
            {"source": "cron_process"},
            kind="tick",
            queue="cron",
            missed_fire_policy="catch_up",
        )
        announce = asyncio.create_task(_announce(client))
        try:
            await client.run(
                {},
                cron_interval=args.cron,
                election_interval=args.election,
                promote_interval=0.2,
                rescue_interval=1.0,
                record_interval=1.0,
                shutdown_timeout=5,
            )
        finally:
            announce.cancel()
    print(f"STOPPED pid={os.getpid()}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
