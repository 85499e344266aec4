"""Where a single insert's client CPU goes: psycopg's cursor, libpq directly, all of wai.

    .venv/bin/python bench/insert_cost.py [--url URL] [--inserts 3000] [--rounds 3]
        [--pyinstrument FILE] [--scratch NAME]

Runs on a scratch database (created, migrated and dropped): the same prepared
``job_insert`` statement with the same parameters, (1) through a psycopg cursor on one
connection (the driver's usual path), (2) through libpq directly on one connection, as
``client.insert`` sends it (:mod:`wai._direct_async`: no cursor), (3) as
``client.insert()``, which also borrows a pooled connection, builds and validates the job
and the returned row. Between (2) and (3), the steps one at a time: (2a) (2) on a
connection borrowed from the client's pool and returned for each insert, (2b) (2) with the
returned row built (``job_insert_own``, on one connection), (2c) the already built job
inserted as ``client.insert`` does it (pool, row, error translation, metrics; what is left
to (3) is building the job from its args). The ways alternate, and each line shows the
median round: jobs/s (one insert after another) and client CPU per insert
(``getrusage``). The difference between (2) and (3) is what wai adds to the driver.
``--pyinstrument FILE`` then runs (3) once more under pyinstrument (the bench extra) and
writes its call tree to FILE.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import psycopg
from psycopg.rows import tuple_row
from scratch import measure, print_medians, scratch_database
from wai_jobs import Noop

import wai
from wai._db_async import _insert_statement, _insert_values, channel, job_insert_own, job_params
from wai._direct_async import run_returning
from wai._sql import query

SCRATCH = "wai_insert_cost"


async def main() -> None:
    """Measure and print the ways."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--inserts", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pyinstrument", metavar="FILE", help="profile client.insert too")
    parser.add_argument("--scratch", default=SCRATCH, help="the scratch database's name")
    opts = parser.parse_args()
    with scratch_database(opts.url, opts.scratch) as url:
        client = wai.AsyncClient(url)
        await client.open()
        await client.migrate()
        job = client._build(wai.EnqueueRequest(Noop(seq=1), queue="bench"))
        params = {**job_params(job), "channel": channel(client.schema)}
        text = query("job_insert", client.schema)
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)

        async def cursor(_: int) -> None:
            async with conn.cursor(row_factory=tuple_row) as cur:
                await cur.execute(text, params)
                await cur.fetchall()

        stmt, channel_text = _insert_statement(False, client.schema)
        values = _insert_values(job, channel_text)

        async def direct(_: int) -> None:
            await run_returning(conn, stmt, values)

        pool = client.pool

        async def pooled(_: int) -> None:
            own = await pool.getconn()
            try:
                await run_returning(own, stmt, values)
            finally:
                await pool.putconn(own)

        async def row(_: int) -> None:
            await job_insert_own(conn, client.schema, job)

        async def built(_: int) -> None:
            await client._insert_built(job)

        async def whole(i: int) -> None:
            await client.insert(Noop(seq=i), queue="bench")

        ways = {
            "1 psycopg: the prepared job_insert, a cursor per insert": cursor,
            "2 the same through libpq directly (no cursor)": direct,
            "2a (2) on a connection borrowed from the pool": pooled,
            "2b (2) and the returned row built": row,
            "2c (2) as client.insert sends a built job": built,
            "3 wai: client.insert(Noop(seq=i))": whole,
        }
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
        for _ in range(opts.rounds):
            for name, fn in ways.items():
                results[name].append(await measure(opts.inserts, 1, fn))
        print_medians(results, 55, 3)
        if opts.pyinstrument:
            from pyinstrument import Profiler  # the bench extra: pip install -e '.[bench]'

            profiler = Profiler(interval=0.0002, async_mode="disabled")
            profiler.start()
            await measure(opts.inserts, 1, whole)
            profiler.stop()
            report = profiler.output_text(unicode=True, show_all=False)
            Path(opts.pyinstrument).write_text(report)  # noqa: ASYNC240 - measuring is over
        await conn.close()
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
