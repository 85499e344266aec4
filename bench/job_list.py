"""The job list and the callbacks view on a table of a million jobs: EXPLAIN ANALYZE per filter.

Fills the jobs table of a scratch schema with ``--rows`` jobs in one ``INSERT ...
SELECT generate_series`` (about 10 s for a million): created over the last 7 days in id
order, up to a second out of order, one job in 10,000 created a minute before its
neighbours (a transaction left open), 97 % completed and the rest failed, retryable,
waiting on a callback (timeouts from 30 minutes ago to 90 minutes ahead), cancelled,
scheduled, available or running; 15 kinds, one of them rare; holes from retention and
from purged stretches. Then for each filter combination it prints the server's execution
and planning time (``EXPLAIN (ANALYZE)``), the index the listing walked, and the client's
wall time (median and maximum of ``--repeat`` calls of ``list_jobs``), and the same for
the API's ``GET /api/v1/jobs`` (bounded looks), ``list_waiting`` and
``list_callback_timeouts``. The schema is dropped at the end.

    .venv/bin/python bench/job_list.py --database-url postgresql://postgres@127.0.0.1/postgres

Run it on a quiet machine: the figures are wall times.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import psycopg
from psycopg import sql

import wai
from wai._admin import check_time_range, parse_search
from wai._db_async import job_list_params
from wai._sql import query
from wai.web import create_app

FILL = """
INSERT INTO {schema}.jobs (kind, queue, args, state, attempt, run_lease, run_at,
    attempted_at, finalized_at, created_at, errors, tags, callback_id, callback_timeout_at)
SELECT k.kind,
       (ARRAY['email', 'default', 'reports'])[1 + i %% 3],
       jsonb_build_object('user_id', i, 'note', 'a payload of a usual size'),
       s.state::{schema}.job_state, 1, 1, c.at, c.at + interval '1 second',
       CASE WHEN s.state IN ('completed', 'failed', 'cancelled')
            THEN c.at + interval '2 seconds' END,
       c.at,
       CASE WHEN s.state IN ('failed', 'retryable') THEN jsonb_build_array(jsonb_build_object(
                'error', 'callback timed out', 'attempt', 1, 'at', c.at + interval '1 hour')
                || CASE WHEN i %% 13 = 0 THEN '{{"rescued": "callback_timeout"}}'::jsonb
                        ELSE '{{}}'::jsonb END)
            ELSE '[]'::jsonb END,
       CASE WHEN i %% 10 = 0 THEN ARRAY['vip'] ELSE '{{}}' END,
       CASE WHEN s.state = 'waiting_external' THEN gen_random_uuid() END,
       CASE WHEN s.state = 'waiting_external'
            THEN now() - interval '30 minutes' + (i %% 7200) * interval '1 second' END
FROM generate_series(1, %(rows)s::int) AS i
CROSS JOIN LATERAL (
    SELECT now() - interval '7 days' + i * (interval '7 days' / %(rows)s::int)
           - (hashint4(i) & 1023) * interval '1 millisecond'
           - CASE WHEN i %% 10000 = 5000 THEN interval '60 seconds' ELSE interval '0' END AS at
) AS c
CROSS JOIN LATERAL (
    SELECT CASE
        WHEN i > %(rows)s::int - 1000 AND i %% 4 = 0 THEN 'available'
        WHEN i > %(rows)s::int - 500 AND i %% 4 = 1 THEN 'running'
        WHEN i %% 97 = 0 THEN 'failed'
        WHEN i %% 501 = 0 THEN 'retryable'
        WHEN i %% 1009 = 0 THEN 'waiting_external'
        WHEN i %% 2003 = 0 THEN 'cancelled'
        WHEN i %% 3001 = 0 THEN 'scheduled'
        ELSE 'completed' END AS state
) AS s
CROSS JOIN LATERAL (
    SELECT (ARRAY['send_email', 'send_email', 'send_email', 'resize_image', 'resize_image',
                  'generate_report', 'sync_crm', 'webhook_deliver', 'webhook_deliver',
                  'webhook_deliver', 'billing.charge_card', 'billing.refund', 'notify_slack',
                  'export_csv', 'import_feed'])[1 + (hashint4(i) & 2147483647) %% 15]
           || CASE WHEN i %% 50000 = 7 THEN '_rare' ELSE '' END AS kind
) AS k
"""

HOLES = """
DELETE FROM {schema}.jobs
WHERE id < (SELECT min(id) + 20000 FROM {schema}.jobs)
   OR id % 50 = 3
   OR id BETWEEN (SELECT min(id) + 400000 FROM {schema}.jobs)
             AND (SELECT min(id) + 420000 FROM {schema}.jobs)
"""


def combos(now: datetime) -> dict[str, dict[str, Any]]:
    """The filter combinations measured, by name."""
    day, hour = timedelta(days=1), timedelta(hours=1)
    return {
        "no filter": {},
        "last 15 min": {"created_after": now - timedelta(minutes=15)},
        "last hour": {"created_after": now - hour},
        "last 24 h": {"created_after": now - day},
        "a day, 3 days ago": {"created_after": now - 3 * day, "created_before": now - 2 * day},
        "an hour, 5 days ago": {
            "created_after": now - 5 * day - hour,
            "created_before": now - 5 * day,
        },
        "24 h + failed": {"created_after": now - day, "state": "failed"},
        "24 h + waiting": {"created_after": now - day, "state": "waiting_external"},
        "a day, 3 days ago + cancelled": {
            "created_after": now - 3 * day,
            "created_before": now - 2 * day,
            "state": "cancelled",
        },
        "24 h + completed": {"created_after": now - day, "state": "completed"},
        "24 h + available": {"created_after": now - day, "state": "available"},
        "24 h + kind (common)": {"created_after": now - day, "kind": "send_email"},
        "24 h + kind (rare)": {"created_after": now - day, "kind": "sync_crm_rare"},
        "1 h + kind (none)": {"created_after": now - hour, "kind": "nope"},
        "24 h + kind (none)": {"created_after": now - day, "kind": "nope"},
        "24 h + search 'billing'": {"created_after": now - day, "search": "billing"},
        "1 h + search (none)": {"created_after": now - hour, "search": "zzz"},
        "24 h + search (none)": {"created_after": now - day, "search": "zzz"},
        "search 'billing'": {"search": "billing"},
        "search by id": {"search": "123456"},
        "search (none, whole table)": {"search": "zzz"},
        "kind (none, whole table)": {"kind": "nope"},
        "failed": {"state": "failed"},
    }


def _walked(plan: dict[str, Any]) -> str:
    """The scans of the listing itself (not the probes of the binary search)."""
    found: list[str] = []

    def visit(node: dict[str, Any], in_search: bool) -> None:
        in_search = (
            in_search
            or node.get("CTE Name") == "probe"
            or node.get("Subplan Name", "").startswith("CTE probe")
        )
        if not in_search and ("Index Name" in node or node["Node Type"] == "Seq Scan"):
            found.append(f"{node['Node Type']} {node.get('Index Name', '')}".strip())
        for child in node.get("Plans", []):
            visit(child, in_search)

    visit(plan, False)
    return ", ".join(dict.fromkeys(found)) or "-"


async def _timed(repeat: int, call: Callable[[], Awaitable[Any]]) -> tuple[float, float, Any]:
    times: list[float] = []
    result: Any = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = await call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), max(times), result


async def measure(url: str, schema: str, repeat: int) -> None:
    async with wai.AsyncClient(url, schema=schema) as client:
        async with client._connection() as conn:  # pyright: ignore[reportPrivateUsage]
            cur = await conn.execute(
                sql.SQL("SELECT max(created_at), count(*) FROM {}.jobs").format(
                    sql.Identifier(schema)
                )
            )
            now, total = await cur.fetchone() or (None, 0)
        print(f"{total:,} jobs in {schema}.jobs\n")
        print(f"{'list_jobs(limit=50)':34} {'rows':>4} {'exec ms':>8} {'plan ms':>8} "
              f"{'p50 ms':>7} {'max ms':>7}  listing walks")  # fmt: skip
        for name, filters in combos(now).items():
            after, before = check_time_range(
                filters.get("created_after"), filters.get("created_before")
            )
            params = job_list_params(
                state=filters.get("state"),
                kind=filters.get("kind"),
                created_after=after,
                created_before=before,
                search=parse_search(filters.get("search")),
                limit=50,
            )
            async with client._connection() as conn:  # pyright: ignore[reportPrivateUsage]
                cur = await conn.execute(
                    "EXPLAIN (ANALYZE, FORMAT JSON) " + query("job_list", schema),
                    params,
                    prepare=False,
                )
                row = await cur.fetchone()
            assert row is not None
            plan = row[0][0]
            p50, worst, rows = await _timed(
                repeat, lambda f=filters: client.list_jobs(limit=50, **f)
            )
            print(
                f"{name:34} {len(rows):4} {plan['Execution Time']:8.2f} "
                f"{plan['Planning Time']:8.2f} {p50:7.1f} {worst:7.1f}  {_walked(plan['Plan'])}"
            )

        print(f"\n{'GET /api/v1/jobs?limit=50':34} {'rows':>4} {'next':>8} {'p50 ms':>7} "
              f"{'max ms':>7}")  # fmt: skip
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(client)), base_url="http://bench"
        ) as api:
            for name, filters in combos(now).items():
                params = {
                    k: v.isoformat() if isinstance(v, datetime) else v for k, v in filters.items()
                }

                async def get(p: dict[str, Any] = params) -> dict[str, Any]:
                    answer = await api.get("/api/v1/jobs", params={**p, "limit": 50})
                    answer.raise_for_status()
                    return answer.json()

                p50, worst, body = await _timed(repeat, get)
                nxt = "-" if body["next_before_id"] is None else "yes"
                print(f"{name:34} {len(body['items']):4} {nxt:>8} {p50:7.1f} {worst:7.1f}")

        print()
        async with client._connection() as conn:  # pyright: ignore[reportPrivateUsage]
            for name, text, params in [
                (
                    "list_waiting (first page)",
                    "job_waiting_list",
                    {"queue": None, "kind": None, "after_at": None, "after_id": None},
                ),
                (
                    "list_callback_timeouts",
                    "job_callback_timeouts",
                    {"queue": None, "kind": None, "scan": 1000},
                ),
            ]:
                cur = await conn.execute(
                    "EXPLAIN (ANALYZE, FORMAT JSON) " + query(text, schema),
                    {**params, "limit": 100},
                    prepare=False,
                )
                row = await cur.fetchone()
                assert row is not None
                plan = row[0][0]
                print(
                    f"{name:34} exec {plan['Execution Time']:7.2f} ms, "
                    f"plan {plan['Planning Time']:5.2f} ms"
                )
        p50, worst, _ = await _timed(repeat, lambda: client.list_waiting(limit=100))
        print(f"{'  list_waiting(limit=100)':34} p50 {p50:6.1f} ms, max {worst:6.1f} ms")
        p50, worst, _ = await _timed(repeat, lambda: client.list_callback_timeouts())
        print(f"{'  list_callback_timeouts()':34} p50 {p50:6.1f} ms, max {worst:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--schema", default="wai_bench_list")
    parser.add_argument("--rows", type=int, default=1_050_000, help="before the holes (~4%%)")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--keep", action="store_true", help="do not drop the schema")
    args = parser.parse_args()
    schema = sql.Identifier(args.schema)
    with psycopg.connect(args.database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))

    async def migrate() -> None:
        async with wai.AsyncClient(args.database_url, schema=args.schema) as client:
            await client.migrate()

    asyncio.run(migrate())
    try:
        with psycopg.connect(args.database_url, autocommit=True) as conn:
            start = time.perf_counter()
            conn.execute(sql.SQL(FILL).format(schema=schema), {"rows": args.rows})
            conn.execute(sql.SQL(HOLES).format(schema=schema))
            conn.execute(sql.SQL("VACUUM ANALYZE {}.jobs").format(schema))
            print(f"filled in {time.perf_counter() - start:.1f} s")
        asyncio.run(measure(args.database_url, args.schema, args.repeat))
    finally:
        if not args.keep:
            with psycopg.connect(args.database_url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(schema))


if __name__ == "__main__":
    main()
