"""Batch insert: wai's ``insert_many`` and ``copy_many`` against bare ``COPY``, 1,000 per call.

    .venv/bin/python bench/batch_cost.py [--url URL] [--batches 20] [--size 1000] [--rounds 3]

Runs on a scratch database (created, migrated and dropped). Each way inserts the same
``Noop`` jobs, built by wai (``build_many``) in every way, so only the write differs:

1. ``client.insert_many(items)``: the ``job_insert_many`` statement (JSON arrays unpacked
   by ``jsonb_array_elements``), returning each new row's id, run_at and created_at, with a
   NOTIFY per queue; its time includes building the jobs and the returned ``JobRow``s.
2. ``COPY wai.jobs (...) FROM STDIN`` in text format, one ``write`` of the whole batch:
   no returned ids, no NOTIFY (a caller would have to send it), no unique-key handling.
3. the same ``COPY``, one ``write_row`` per job.
4. ``client.copy_many(items)``: (3) in a transaction with the NOTIFY of the jobs' queues,
   its time including building the jobs.

The four alternate, and each line shows the median round: jobs/s and client CPU per job
(``getrusage``). (2) is the most a ``COPY`` path could gain; what it gives up is listed above.
"""

from __future__ import annotations

import argparse
import asyncio

from psycopg import sql
from scratch import measure, print_medians, scratch_database
from wai_jobs import Noop

import wai
from wai._inserts import NewJob

SCRATCH = "wai_batch_cost"
COLUMNS = ("kind", "queue", "args", "state", "priority", "max_attempts")


def _text_field(value: object) -> str:
    """One field of COPY's text format (the values here hold no tab, newline or backslash
    but JSON's own backslashes, which COPY would read as escapes: doubled)."""
    return str(value).replace("\\", "\\\\")


def _copy_text(jobs: list[NewJob]) -> str:
    return "".join(
        f"{job.kind}\t{job.queue}\t{_text_field(job.args)}\t{job.state}\t"
        f"{job.priority}\t{job.max_attempts}\n"
        for job in jobs
    )


async def main() -> None:
    """Measure and print the four ways."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    with scratch_database(opts.url, SCRATCH) as url:
        client = wai.AsyncClient(url)
        await client.open()
        await client.migrate()
        copy_sql = sql.SQL("COPY {}.jobs ({}) FROM STDIN").format(
            sql.Identifier(client.schema), sql.SQL(", ").join(map(sql.Identifier, COLUMNS))
        )

        def items(start: int) -> list[wai.EnqueueRequest]:
            return [
                wai.EnqueueRequest(Noop(seq=i), queue="bench")
                for i in range(start, start + opts.size)
            ]

        async def statement(start: int) -> None:
            await client.insert_many(items(start))

        async def copy_whole(start: int) -> None:
            jobs = client._build_many(items(start))
            async with (
                client.pool.connection() as conn,
                conn.cursor() as cur,
                cur.copy(copy_sql) as copy,
            ):
                await copy.write(_copy_text(jobs))

        async def copy_rows(start: int) -> None:
            jobs = client._build_many(items(start))
            async with (
                client.pool.connection() as conn,
                conn.cursor() as cur,
                cur.copy(copy_sql) as copy,
            ):
                for job in jobs:
                    row = (
                        job.kind,
                        job.queue,
                        job.args,
                        str(job.state),
                        job.priority,
                        job.max_attempts,
                    )
                    await copy.write_row(row)

        async def copy_many(start: int) -> None:
            await client.copy_many(items(start))

        ways = {
            "1 wai: client.insert_many (one statement, ids back)": statement,
            "2 COPY, text, one write per batch": copy_whole,
            "3 COPY, one write_row per job": copy_rows,
            "4 wai: client.copy_many (COPY, a count back)": copy_many,
        }
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
        for _ in range(opts.rounds):
            for name, fn in ways.items():
                results[name].append(await measure(opts.batches, opts.size, fn))
        print_medians(results, 52, 4)
        async with client._connection() as conn:
            cur = await conn.execute(
                sql.SQL("SELECT count(*) FROM {}.jobs").format(sql.Identifier(client.schema))
            )
            stored = (await cur.fetchone() or (0,))[0]
        expected = opts.rounds * len(ways) * opts.batches * opts.size
        print(f"rows stored: {stored:,} (expected {expected:,})")
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
