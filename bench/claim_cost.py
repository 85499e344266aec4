"""What a claim's many sizes cost: claims of any size against claims of a few sizes.

    .venv/bin/python bench/claim_cost.py [--url URL] [--claims 2000] [--rounds 3]
        [--connections 10] [--most 64] [--scratch NAME]

A claim's LIMIT is written into its statement's text (``wai.worker._queries``), so every
size is a statement of its own: psycopg prepares it on a connection after five uses, and
the server plans its first executions one by one. A queue at a steady rate claims many
different sizes (its free slots, or half of them); the claim loop rounds them down to a
few (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64 ...: :func:`wai.worker._producer.claim_size`).
This script measures what that saves. Runs on a scratch database (created, migrated and
dropped): ``--claims`` claims of one queue, their limits drawn at random from 1 to
``--most`` (the same seeded draw each time), spread in turn over ``--connections``
connections as a worker's pool spreads them, each claim probing its floors as the claim
loop does (``wai.worker._floors``). Three ways:

- "any size": each drawn limit as it is;
- "few sizes": each drawn limit rounded down;
- "few sizes, many texts": the rounded limits, each statement's text tagged with the drawn
  limit, so as many statements as "any size" for the same claims as "few sizes": the
  difference between these two is the statements' count alone.

Each round fills a queue of its own with exactly the jobs its claims take (statistics
taken), and the ways alternate. Each line shows the median round: milliseconds per claim
(wall, one claim after another), jobs claimed per second, distinct statements.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from typing import LiteralString

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row
from scratch import scratch_database
from wai_jobs import Noop

import wai
from wai.worker import _queries as worker_db
from wai.worker._floors import Floors
from wai.worker._producer import claim_size

SCRATCH = "wai_claim_cost"


async def run_round(
    client: wai.AsyncClient,
    url: str,
    queue: str,
    claims: list[tuple[int, int]],
    connections: int,
) -> tuple[float, float]:
    """Fill ``queue`` with the jobs of ``claims`` (limit, text tag), claim them:
    (ms per claim, jobs/s)."""
    wanted = sum(limit for limit, _ in claims)
    await client.copy_many([wai.EnqueueRequest(Noop(seq=i), queue=queue) for i in range(wanted)])
    conns = [
        await psycopg.AsyncConnection.connect(url, autocommit=True) for _ in range(connections)
    ]
    # Statistics, as a worker's maintenance keeps them (this server may run no autovacuum).
    await conns[0].execute(sql.SQL("ANALYZE {}.jobs").format(sql.Identifier(client.schema)))
    try:
        taken = 0
        floors = Floors()
        t = time.perf_counter()
        for i, (limit, tag) in enumerate(claims):
            conn = conns[i % connections]
            now = time.monotonic()
            if floors.due(now):
                floors.probing(now)
                await worker_db.job_ready_probe(conn, client.schema, queue=queue, floors=floors)
            text: LiteralString = worker_db._claim_query(client.schema, limit)  # pyright: ignore[reportPrivateUsage]
            if tag != limit:
                text = text + " /* " + str(tag) + " */"  # type: ignore[assignment]
            params = worker_db._claim_params(queue, floors.values, {}, None)  # pyright: ignore[reportPrivateUsage]
            async with conn.cursor(row_factory=tuple_row) as cur:
                await cur.execute(text, params)
                rows = await cur.fetchall()
            floors.claimed += len(rows)
            taken += len(rows)
        elapsed = time.perf_counter() - t
    finally:
        for conn in conns:
            await conn.close()
    assert taken == wanted, f"claimed {taken} of {wanted}"
    return elapsed / len(claims) * 1000, taken / elapsed


async def main() -> None:
    """Measure and print the three ways."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument("--most", type=int, default=64, help="the largest limit drawn")
    parser.add_argument("--scratch", default=SCRATCH, help="the scratch database's name")
    opts = parser.parse_args()
    draw = random.Random(7)
    drawn = [draw.randint(1, opts.most) for _ in range(opts.claims)]
    rounded = [claim_size(n, opts.most) for n in drawn]
    ways = {
        "any size": [(n, n) for n in drawn],
        "few sizes": [(n, n) for n in rounded],
        "few sizes, many texts": list(zip(rounded, drawn, strict=True)),
    }
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    with scratch_database(opts.url, opts.scratch) as url:
        client = wai.AsyncClient(url)
        await client.open()
        try:
            await client.migrate()
            for r in range(opts.rounds):
                for w, (name, claims) in enumerate(ways.items()):
                    results[name].append(
                        await run_round(client, url, f"q{r}-{w}", claims, opts.connections)
                    )
        finally:
            await client.close()
    print(
        f"{opts.claims} claims of 1-{opts.most} jobs over {opts.connections} connections, "
        f"median of {opts.rounds} rounds"
    )
    for name, claims in ways.items():
        ms = statistics.median(m for m, _ in results[name])
        rate = statistics.median(j for _, j in results[name])
        texts = len(set(claims))
        jobs = sum(limit for limit, _ in claims) / len(claims)
        print(
            f"{name:22s} {ms:6.3f} ms/claim  {rate:8,.0f} jobs/s  "
            f"{texts} statements, {jobs:.1f} jobs/claim"
        )


if __name__ == "__main__":
    asyncio.run(main())
