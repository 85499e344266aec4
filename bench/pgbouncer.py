"""What PgBouncer in transaction pooling mode costs wai, and what turning psycopg's
prepared statements off costs on its own.

``.venv/bin/python bench/pgbouncer.py [--inserts 2000] [--jobs 10000] [--runs 3]``

Starts a throwaway PgBouncer (Debian's ``pgbouncer``, pool_mode=transaction, 20 server
connections) in front of the server, and measures, the setups taking turns run by run,
each on a fresh scratch database:

- ``direct``: a client straight to PostgreSQL, wai's defaults (prepared statements on);
- ``direct, unprepared``: the same with ``prepared_statements=False``;
- ``pgbouncer``: through PgBouncer, ``prepared_statements=False``, LISTEN on a direct
  connection (``listen_url``), the recipe of docs/deployment.md.

Workloads: ``--inserts`` single ``client.insert`` calls one after the other (the round
trip shows), and the drain of ``--jobs`` no-op jobs with 64 slots.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import _pgbouncer as pgbouncer  # noqa: E402

import wai  # noqa: E402

SETUPS = ("direct", "direct, unprepared", "pgbouncer")


@dataclass
class Noop:
    seq: int


def _scratch(admin_url: str, name: str, *, create: bool) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[arg-type]
        if create:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]


def _client(setup: str, direct: str, bounced: str) -> wai.AsyncClient:
    if setup == "direct":
        return wai.AsyncClient(direct)
    if setup == "direct, unprepared":
        return wai.AsyncClient(direct, prepared_statements=False)
    return wai.AsyncClient(bounced, prepared_statements=False, listen_url=direct)


async def _measure(
    setup: str, direct: str, bounced: str, inserts: int, jobs: int
) -> dict[str, Any]:
    async with wai.AsyncClient(direct) as owner:
        await owner.migrate()
    client = _client(setup, direct, bounced)
    done = 0

    @client.task(Noop, queue="bench")
    async def noop(job: wai.Job[Noop]) -> None:
        nonlocal done
        done += 1

    async with client:
        await client.insert(Noop(seq=-1))  # a warm connection
        t0 = time.perf_counter()
        for i in range(inserts):
            await client.insert(Noop(seq=i))
        insert_rate = inserts / (time.perf_counter() - t0)
        await client.copy_many(
            [wai.EnqueueRequest(Noop(seq=i), queue="bench") for i in range(jobs)]
        )
        total = inserts + 1 + jobs
        t0 = time.perf_counter()
        await client.start({"bench": 64})
        while done < total:  # noqa: ASYNC110 - a poll of a counter, as the other benches
            await asyncio.sleep(0.02)
        drain_rate = total / (time.perf_counter() - t0)
        await client.shutdown()
    return {"insert": insert_rate, "drain": drain_rate}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--inserts", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dbname", default="wai_bench_pgbouncer")
    opts = parser.parse_args()
    host = os.environ.get("PGHOST", "127.0.0.1")
    port = os.environ.get("PGPORT", "5432")
    user = os.environ.get("PGUSER", "postgres")
    admin = f"postgresql://{user}@{host}:{port}/postgres"
    direct = f"postgresql://{user}@{host}:{port}/{opts.dbname}"
    results: dict[str, dict[str, list[float]]] = {s: {"insert": [], "drain": []} for s in SETUPS}
    with pgbouncer.running(host, port, user, pool_size=20) as bouncer_port:
        bounced = f"postgresql://{user}@127.0.0.1:{bouncer_port}/{opts.dbname}"
        for run in range(opts.runs):
            for setup in SETUPS if run % 2 == 0 else SETUPS[::-1]:
                _scratch(admin, opts.dbname, create=True)
                try:
                    got = asyncio.run(_measure(setup, direct, bounced, opts.inserts, opts.jobs))
                finally:
                    _scratch(admin, opts.dbname, create=False)
                for k, v in got.items():
                    results[setup][k].append(v)
                print(
                    f"run {run + 1} {setup:>18}: insert {got['insert']:7,.0f}/s, "
                    f"drain {got['drain']:7,.0f}/s",
                    flush=True,
                )
    base = {k: statistics.median(results["direct"][k]) for k in ("insert", "drain")}
    print(f"\nmedians of {opts.runs}: {opts.inserts:,} single inserts, a drain of {opts.jobs:,}")
    print("| setup | single insert/s | against direct | drain jobs/s | against direct |")
    print("|---|---|---|---|---|")
    for setup in SETUPS:
        ins = statistics.median(results[setup]["insert"])
        dr = statistics.median(results[setup]["drain"])
        print(
            f"| {setup} | {ins:,.0f} | {ins / base['insert']:.2f} | {dr:,.0f} | "
            f"{dr / base['drain']:.2f} |"
        )


if __name__ == "__main__":
    main()
