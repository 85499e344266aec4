"""The admin API over a million jobs: how long each page's calls take.

Fills a scratch database with ``--jobs`` rows (default 1,000,000: mostly completed, the
rest spread over every other state, ten kinds, four queues, tags, follow-up chains,
dead letters, a day of throughput counts and depth samples), vacuums and analyzes it as
autovacuum would, then calls every read endpoint of the admin API the web UI uses
``--repeat`` times through the real Starlette app (in process, over httpx's ASGI
transport: the server's side of each request, without a socket) and prints p50, p95 and
max per call. The dashboard row is
its page's requests issued together, as the UI does. ::

    .venv/bin/python bench/admin_scale.py                   # 1M jobs, ~2 min to fill
    .venv/bin/python bench/admin_scale.py --jobs 100000 --repeat 20   # a quick check

The scratch database (``--dbname``, default ``wai_admin_bench``) is dropped and created
around the run unless ``--keep`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import psycopg
from psycopg import sql

import wai
from wai.web import create_app

SCHEMA = "wai"

# Shares of the jobs table by state (the rest is completed), as in a queue that has run for a
# while: finished history dominates, the live set is small.
SHARES = {
    "failed": 0.02,
    "cancelled": 0.01,
    "available": 0.01,
    "scheduled": 0.005,
    "retryable": 0.002,
    "waiting_external": 0.001,
    "running": 0.0002,
}
QUEUES = ("default", "email", "billing", "reports")
KINDS = tuple(f"kind_{i}" for i in range(10))

FILL = """
INSERT INTO {schema}.jobs (kind, queue, args, state, priority, attempt, max_attempts, run_at,
                           attempted_at, heartbeat_at, finalized_at, created_at, errors, tags,
                           callback_id, callback_timeout_at)
SELECT
    'kind_' || (g %% 10),
    (ARRAY['default', 'email', 'billing', 'reports'])[1 + g %% 4],
    jsonb_build_object('n', g, 'to', 'user' || g || '@example.com'),
    s.state::{schema}.job_state,
    1 + g %% 4,
    CASE WHEN s.state IN ('available', 'scheduled') THEN 0 ELSE 1 END,
    25,
    CASE WHEN s.state = 'scheduled' THEN now() + interval '1 hour'
         ELSE now() - interval '1 day' + (g::float8 / %(n)s) * interval '1 day' END,
    CASE WHEN s.state IN ('available', 'scheduled') THEN NULL ELSE now() END,
    CASE WHEN s.state = 'running' THEN now() ELSE NULL END,
    CASE WHEN s.state IN ('completed', 'failed', 'cancelled')
         THEN now() - interval '1 day' + (g::float8 / %(n)s) * interval '1 day' END,
    now() - interval '1 day' + (g::float8 / %(n)s) * interval '1 day',
    CASE WHEN s.state IN ('failed', 'retryable')
         THEN jsonb_build_array(jsonb_build_object('error', 'boom ' || g, 'attempt', 1))
         ELSE '[]'::jsonb END,
    CASE WHEN g %% 7 = 0 THEN ARRAY['tenant-' || (g %% 50)] ELSE '{{}}'::text[] END,
    CASE WHEN s.state = 'waiting_external' THEN gen_random_uuid() END,
    CASE WHEN s.state = 'waiting_external' THEN now() + interval '1 hour' END
FROM generate_series(1, %(n)s) AS g
CROSS JOIN LATERAL (SELECT CASE {cases} ELSE 'completed' END AS state) AS s
"""

CHAINS = """
-- Follow-up chains: every 1000th job gets two completed follow-ups, one of which has one.
INSERT INTO {schema}.jobs (kind, queue, state, attempt, finalized_at, trigger_job_id,
                           trigger_run_lease, trigger_outcome, trigger_spec)
SELECT 'followup', 'default', 'completed', 1, now(), id, 1, 'completed', 'spec_' || k
FROM {schema}.jobs, generate_series(1, 2) AS k
WHERE id % 1000 = 0 AND state = 'completed'
"""

DLQ = """
-- Dead letters: the oldest failed jobs move to the dead-letter queue, as an operator's
-- `wai dlq move` would.
WITH moved AS (
    DELETE FROM {schema}.jobs
    WHERE id IN (SELECT id FROM {schema}.jobs WHERE state = 'failed' ORDER BY id LIMIT %(n)s)
    RETURNING *
)
INSERT INTO {schema}.dlq (job_id, kind, queue, tags, reason, dlq_at, job)
SELECT m.id, m.kind, m.queue, m.tags, 'max_attempts_exhausted', m.finalized_at, to_jsonb(m)
FROM moved AS m
"""


HISTORY = """
-- A day of what workers and the leader record: throughput per minute for every queue, kind
-- and three events, and a depth sample of every queue every 15 seconds.
INSERT INTO {schema}.throughput (minute, queue, kind, event, n)
SELECT date_trunc('minute', now()) - make_interval(mins => m), q, k, e, 1 + (m * 7) %% 50
FROM generate_series(0, %(minutes)s - 1) AS m,
     unnest(ARRAY['default', 'email', 'billing', 'reports']) AS q,
     generate_series(0, 9) AS kn, LATERAL (SELECT 'kind_' || kn AS k) AS kk,
     unnest(ARRAY['completed', 'retried', 'failed']) AS e;
INSERT INTO {schema}.queue_depth (at, queue, counts, oldest_available_lag)
SELECT now() - make_interval(secs => s * 15), q,
       jsonb_build_object('available', 2500, 'running', 50, 'scheduled', 1250), 0.5
FROM generate_series(0, %(minutes)s * 4 - 1) AS s,
     unnest(ARRAY['default', 'email', 'billing', 'reports']) AS q;
"""


def _cases(n: int) -> str:
    """A CASE over ``g`` giving each state its share of ``1..n``, in contiguous-free stripes."""
    parts, edge = [], 0
    for state, share in SHARES.items():
        width = max(1, round(share * 10_000))
        parts.append(f"WHEN g %% 10000 < {edge + width} THEN '{state}'")
        edge += width
    return " ".join(parts)


async def fill(url: str, n: int, dlq: int, history: int) -> None:
    """Migrate, then insert the jobs, chains and dead letters, then VACUUM ANALYZE."""
    async with wai.AsyncClient(url, schema=SCHEMA) as client:
        await client.migrate()
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        step = 200_000
        for lo in range(0, n, step):
            count = min(step, n - lo)
            text = FILL.format(schema=SCHEMA, cases=_cases(n)).replace(
                "generate_series(1, %(n)s)", f"generate_series({lo + 1}, {lo + count})"
            )
            await conn.execute(text.encode(), {"n": n})  # pyright: ignore[reportArgumentType]
        await conn.execute(CHAINS.format(schema=SCHEMA).encode())  # pyright: ignore[reportArgumentType]
        await conn.execute(DLQ.format(schema=SCHEMA).encode(), {"n": dlq})  # pyright: ignore[reportArgumentType]
        for statement in HISTORY.format(schema=SCHEMA).split(";")[:-1]:
            await conn.execute(statement.encode(), {"minutes": history})  # pyright: ignore[reportArgumentType]
        await conn.execute(f"VACUUM ANALYZE {SCHEMA}.jobs".encode())  # pyright: ignore[reportArgumentType]
        for table in ("dlq", "throughput", "queue_depth"):
            await conn.execute(f"VACUUM ANALYZE {SCHEMA}.{table}".encode())  # pyright: ignore[reportArgumentType]
        cur = await conn.execute(
            f"SELECT state::text, count(*) FROM {SCHEMA}.jobs GROUP BY 1 ORDER BY 2 DESC".encode()  # pyright: ignore[reportArgumentType]
        )
        rows = await cur.fetchall()
        print(
            f"filled in {time.perf_counter() - started:.0f} s: "
            + ", ".join(f"{s} {c:,}" for s, c in rows)
        )


async def timed(repeat: int, call: Callable[[], Awaitable[None]]) -> list[float]:
    """Milliseconds of ``repeat`` calls of ``call``, after two unmeasured ones."""
    for _ in range(2):
        await call()
    out: list[float] = []
    for _ in range(repeat):
        started = time.perf_counter()
        await call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * len(ordered)) - 1)]


async def measure(url: str, repeat: int) -> list[tuple[str, list[float]]]:
    """Time every page's API calls; returns (name, milliseconds) per call."""
    client = wai.AsyncClient(url, schema=SCHEMA, max_connections=8)
    app = create_app(client, token=None)
    results: list[tuple[str, list[float]]] = []
    async with (
        client,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as http,
    ):

        async def get(path: str) -> Any:
            response = await http.get(f"/api/v1/{path}")
            if response.status_code != 200:
                raise SystemExit(f"GET {path}: {response.status_code} {response.text[:300]}")
            return response.json()

        page = await get("jobs?state=failed&limit=50")
        before = page["items"][-1]["id"]
        some_job = page["items"][0]["id"]
        chained = (await get("jobs?kind=followup&limit=1"))["items"][0]["trigger"]["job_id"]
        dashboard = (
            "queues",
            "dlq/stats",
            "outbox/stats",
            "instances",
            "stats/throughput?minutes=60",
            "stats/depth?minutes=60",
        )
        calls: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("dashboard (its 6 requests at once)", lambda: asyncio.gather(*map(get, dashboard))),
            ("queue stats", lambda: get("queues")),
            ("throughput, last hour", lambda: get("stats/throughput?minutes=60")),
            ("depth samples, last hour", lambda: get("stats/depth?minutes=60")),
            ("jobs, no filter", lambda: get("jobs?limit=50")),
            ("jobs, state=failed", lambda: get("jobs?state=failed&limit=50")),
            (
                "jobs, state=failed, page 2",
                lambda: get(f"jobs?state=failed&limit=50&before_id={before}"),
            ),
            (
                "jobs, state=available, queue=email",
                lambda: get("jobs?state=available&queue=email&limit=50"),
            ),
            ("jobs, state=completed", lambda: get("jobs?state=completed&limit=50")),
            ("jobs, queue=billing", lambda: get("jobs?queue=billing&limit=50")),
            ("jobs, kind=kind_3", lambda: get("jobs?kind=kind_3&limit=50")),
            ("jobs, tag=tenant-7", lambda: get("jobs?tag=tenant-7&limit=50")),
            ("jobs, kind that no job has", lambda: get("jobs?kind=absent&limit=50")),
            ("job detail", lambda: get(f"jobs/{some_job}")),
            ("job lineage", lambda: get(f"jobs/{chained}/lineage")),
            ("dead letters, page 1", lambda: get("dlq?limit=50")),
            ("outbox", lambda: get("outbox?limit=50")),
            ("cron", lambda: get("cron")),
            ("instances", lambda: get("instances")),
        ]
        for name, call in calls:
            results.append((name, await timed(repeat, call)))
    return results


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--dbname", default="wai_admin_bench")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--dlq", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument(
        "--history-minutes", type=int, default=1440, help="minutes of throughput and depth"
    )
    parser.add_argument("--keep", action="store_true", help="reuse and keep the database")
    args = parser.parse_args()
    base = psycopg.conninfo.conninfo_to_dict(args.database_url)
    url = psycopg.conninfo.make_conninfo(**{**base, "dbname": args.dbname})
    admin = psycopg.conninfo.make_conninfo(**{**base, "dbname": "postgres"})
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (args.dbname,)
        ).fetchone()
        if not (args.keep and exists):
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(args.dbname)
                )
            )
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(args.dbname)))
            await fill(url, args.jobs, args.dlq, args.history_minutes)
    try:
        results = await measure(url, args.repeat)
    finally:
        if not args.keep:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(args.dbname)
                    )
                )
    print(f"\n{args.jobs:,} jobs, {args.repeat} calls each (milliseconds)\n")
    print("| call | p50 | p95 | max |\n|---|---:|---:|---:|")
    worst = 0.0
    for name, ms in results:
        worst = max(worst, p95(ms))
        print(f"| {name} | {statistics.median(ms):.1f} | {p95(ms):.1f} | {max(ms):.1f} |")
    print(f"\nworst p95: {worst:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
