"""The floor under every drain: a plain psycopg loop with no library, on the same server.

Usage::

    .venv/bin/python bench/plain_loop.py [--jobs 20000] [--batch 32,128] [--runs 3]

One connection in autocommit claims ``batch`` available rows with ``FOR UPDATE SKIP
LOCKED`` (marking them running), then marks them completed, until none is left: two
statements and two transactions per batch, no handler, no heartbeat, no retries, no
follow-ups. The table is the least a queue needs (an id, a state, JSON args, two
timestamps) with one partial index on the available rows, filled by ``COPY`` and analysed
before each run, in a scratch database dropped afterwards. What a drain of a real queue
costs beyond this is its own work: the figure puts ``bench/run.py``'s drains in proportion
on the day they run (the machine's speed varies from one day to the next).
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg
from scratch import scratch_database

SERVER = "postgresql://postgres@127.0.0.1:5432"

SETUP = (
    "CREATE TABLE plain_jobs (id bigserial PRIMARY KEY,"
    " state text NOT NULL DEFAULT 'available', args jsonb NOT NULL,"
    " attempted_at timestamptz, finalized_at timestamptz)",
    "CREATE INDEX plain_jobs_available ON plain_jobs (id) WHERE state = 'available'",
)

CLAIM = (
    "UPDATE plain_jobs SET state = 'running', attempted_at = now()"
    " WHERE id = ANY (ARRAY(SELECT id FROM plain_jobs WHERE state = 'available'"
    " ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED))"
    " RETURNING id, args"
)

COMPLETE = "UPDATE plain_jobs SET state = 'completed', finalized_at = now() WHERE id = ANY (%s)"


def drain(url: str, jobs: int, batch: int) -> float:
    """Fill the table with ``jobs`` rows, drain it ``batch`` at a time: jobs/s."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS plain_jobs")
        for statement in SETUP:
            conn.execute(statement)
        with conn.cursor().copy("COPY plain_jobs (args) FROM STDIN") as copy:
            for i in range(jobs):
                copy.write_row([f'{{"seq": {i}}}'])
        conn.execute("VACUUM ANALYZE plain_jobs")
        done = 0
        began = time.perf_counter()
        while True:
            rows = conn.execute(CLAIM, (batch,)).fetchall()
            if not rows:
                break
            conn.execute(COMPLETE, ([r[0] for r in rows],))
            done += len(rows)
        elapsed = time.perf_counter() - began
    if done != jobs:
        raise SystemExit(f"drained {done} of {jobs} rows")
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", default=SERVER, help="server URL (database part ignored)")
    parser.add_argument("--dbname", default="wai_plain", help="scratch database")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", default="32,128", help="rows per claim, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    opts = parser.parse_args()
    batches = [int(b) for b in opts.batch.split(",")]
    results: dict[int, list[float]] = {b: [] for b in batches}
    with scratch_database(opts.server, opts.dbname) as url:
        for run in range(1, opts.runs + 1):
            for batch in batches:  # the batch sizes take turns, as run.py's libraries do
                rate = drain(url, opts.jobs, batch)
                results[batch].append(rate)
                print(f"plain loop, batch {batch}, run {run}: {rate:,.0f} jobs/s", flush=True)
    print()
    print("| plain loop (one connection) | jobs/s: median (min-max) |")
    print("|---|---|")
    for batch, rates in results.items():
        print(
            f"| claim {batch}, complete them | {statistics.median(rates):,.0f} "
            f"({min(rates):,.0f}-{max(rates):,.0f}) |"
        )


if __name__ == "__main__":
    main()
