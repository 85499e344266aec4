"""The hot statements' generic plans: a primary-key probe per row, never a table scan.

psycopg prepares a statement after a few executions and PostgreSQL may then keep one
generic plan for it, made without the parameter values and from whatever statistics
the table has. These tests build that plan on purpose (``plan_cache_mode =
force_generic_plan``) on a table whose statistics say nothing is running, the state
in which a generic plan once scanned every running row per batch.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString, cast

import psycopg
import pytest
from psycopg import sql
from psycopg._queries import PostgresQuery  # pyright: ignore[reportPrivateImportUsage]
from psycopg.adapt import Transformer

import wai
from tests.integration._helpers import Work, wait_for
from wai._db import job_list_params
from wai._sql import query
from wai.maintenance import Analyzer, AnalyzerResult
from wai.maintenance.analyzer import needs_analyze
from wai.worker._queries import _claim_query  # pyright: ignore[reportPrivateUsage]

PARAMS: dict[str, Any] = {
    "id": [1, 2],
    "run_lease": [1, 1],
    "state": ["completed", "completed"],
    "delay": [None, None],
    "error": [None, None],
    "terminal": [False, False],
    "attempt_delta": [0, 0],
    "progress": [None, None],
    "callback_id": [None, None],
    "at": [None, None],
    "run_at": [None, None],
    "queue": "q",
    "floors": [0, 0, 0, 0],
    "limit": 32,
    "deadline_kinds": ["work"],
    "deadline_seconds": [5.0],
    "default_deadline": None,
}


def generic_plan(conn: psycopg.Connection[Any], name: str, schema: str) -> str:
    converted = PostgresQuery(Transformer(conn))
    # the claim runs with its limit written in the text (see _claim_query)
    claims = ("job_claim", "job_claim_limited")
    text = _claim_query(schema, 32, name) if name in claims else query(name, schema)
    converted.convert(text, PARAMS)
    text = converted.query.decode()
    nulls = ", ".join("NULL" for _ in converted.params or ())
    # the text is a packaged query converted by psycopg: as trusted as a literal
    prepare = cast(LiteralString, f"PREPARE hot AS {text}".replace("%", "%%"))
    with conn.transaction():
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(prepare)
        try:
            cur = conn.execute(f"EXPLAIN EXECUTE hot({nulls})")
            return "\n".join(row[0] for row in cur.fetchall())
        finally:
            conn.execute("DEALLOCATE hot")


@pytest.fixture
def analyzed(sclient: wai.Client) -> wai.Client:
    """2,000 available and 2,000 completed jobs, analyzed while none is running."""
    sclient.insert_many([Work() for _ in range(2000)])
    with sclient._connection() as conn:
        jobs = sql.Identifier(sclient.schema, "jobs")
        conn.execute(sql.SQL("UPDATE {} SET state = 'completed' WHERE id % 2 = 0").format(jobs))
        conn.execute(sql.SQL("ANALYZE {}").format(jobs))
    return sclient


@pytest.mark.parametrize(
    "name",
    [
        "job_claim",
        "job_claim_limited",
        "job_finalize_many",
        "job_finalize_many_ids",
        "job_heartbeat_many",
        "job_heartbeat_finished",
    ],
)
def test_the_generic_plan_finds_rows_by_primary_key(analyzed: wai.Client, name: str) -> None:
    with analyzed._connection() as conn:
        plan = generic_plan(conn, name, analyzed.schema)
    assert "jobs_pkey" in plan, plan
    assert "Seq Scan on jobs" not in plan, plan
    assert "jobs_running_idx" not in without_flow_cap(plan), plan
    assert "Hash Join" not in without_flow_cap(plan), plan
    if name.startswith("job_claim"):
        # each lane walked from its floor: an index condition on ready_seq, not a filter
        assert re.search(
            r"Index Scan using jobs_ready_idx[^\n]*\n\s+Index Cond: .*ready_seq >=", plan
        ), plan


def without_flow_cap(plan: str) -> str:
    """The plan without the claim's flow-control CTEs, which only run under a limit: ``cap``
    counts the running attempts of a queue with a global concurrency, ``spent_by_kind``
    joins the jobs claimed (a few rows in memory) to the buckets of rate-limited kinds."""
    return re.sub(r"\n  CTE (?:cap|spent_by_kind)\n(?:    .*\n)+", "\n", plan + "\n")


def test_only_the_flow_cap_of_the_limited_claim_reads_running_rows(analyzed: wai.Client) -> None:
    with analyzed._connection() as conn:
        plain = generic_plan(conn, "job_claim", analyzed.schema)
        limited = generic_plan(conn, "job_claim_limited", analyzed.schema)
    assert "jobs_running_idx" not in plain, plain
    assert "CTE cap" in limited, limited
    assert "jobs_running_idx" in limited, limited
    assert "jobs_running_idx" not in without_flow_cap(limited), limited


def test_the_claim_is_prepared_with_its_limit_in_the_text() -> None:
    text = _claim_query("wai", 32)
    assert "LIMIT 32\n" in text
    assert "%(limit)s" not in text
    assert _claim_query("wai", 32) is text  # one text, hence one prepared statement, per limit


async def test_the_analyzer_refreshes_statistics_a_small_table_grew_out_of(
    aclient: wai.AsyncClient, sclient: wai.Client
) -> None:
    """The soak's case: statistics taken while the table was nearly empty, then growth.

    A generic plan made from them reads the whole table for every batch, and keeps it
    until new statistics invalidate it; on a server without autovacuum nobody takes them.
    """
    sclient.insert_many([Work() for _ in range(5)])
    with sclient._connection() as conn:
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(sclient.schema, "jobs")))
        assert "Seq Scan on jobs" in generic_plan(conn, "job_finalize_many_ids", sclient.schema)
    analyzer = Analyzer(aclient.pool, aclient.schema, interval=30)
    assert not (await analyzer.run_once()).analyzed  # 5 rows changed: nothing to do
    with sclient.transaction() as tx:
        tx.insert_many([Work() for _ in range(3000)])
        # the counts reach the statistics views within 10 s; this session's, at its commit
        tx.connection.execute("SELECT pg_stat_force_next_flush()")

    async def analyzed() -> AnalyzerResult | None:
        result = await analyzer.run_once()  # the inserts' counts reach the view within ~1 s
        return result if result.analyzed else None

    result = await wait_for(analyzed, 15, what="an ANALYZE after 3,000 inserts")
    assert result.changed >= 3000
    for name in ("job_claim", "job_finalize_many_ids", "job_heartbeat_many"):
        with sclient._connection() as conn:
            plan = generic_plan(conn, name, sclient.schema)
        assert "jobs_pkey" in plan, plan
        assert "Seq Scan on jobs" not in plan, plan
    again = await analyzer.run_once()
    assert not again.analyzed
    assert again.reltuples >= 3000


async def test_the_analyzer_leaves_a_table_another_session_holds_to_its_next_pass(
    aclient: wai.AsyncClient, sclient: wai.Client, database_url: str
) -> None:
    """A vacuum holds the table's lock for as long as it runs: an ANALYZE queued behind it
    would hold a pooled connection that long. The pass gives up within its lock wait
    (50 ms); the next one runs."""
    with sclient.transaction() as tx:
        tx.insert_many([Work() for _ in range(3000)])
        tx.connection.execute("SELECT pg_stat_force_next_flush()")
    analyzer = Analyzer(aclient.pool, aclient.schema, interval=30)
    table = sql.Identifier(sclient.schema, "jobs")
    with psycopg.connect(database_url) as holder:  # the lock a VACUUM takes
        holder.execute(sql.SQL("LOCK TABLE {} IN SHARE UPDATE EXCLUSIVE MODE").format(table))

        async def passed() -> AnalyzerResult | None:
            result = await analyzer.run_once()
            return result if result.changed >= 3000 else None

        held = await wait_for(passed, 15, what="a pass that sees the 3,000 inserts")
        assert not held.analyzed
        holder.rollback()
    result = await analyzer.run_once()
    assert result.analyzed
    assert result.autoanalyzed_ago is None  # this server runs without autovacuum


@pytest.mark.parametrize(
    ("reltuples", "changed", "autoanalyzed_ago", "analyze"),
    [
        (-1.0, 999, None, False),  # never analyzed, few changes
        (-1.0, 1000, None, True),
        (5.0, 1000, None, True),  # the soak's case
        (10_000.0, 4_999, None, False),
        (10_000.0, 5_000, None, True),
        (1_000_000.0, 400_000, None, False),
        # autovacuum analyzed it a minute ago: it keeps up, whatever changed since
        (10_000.0, 500_000, 60.0, False),
        (-1.0, 1000, 179.0, False),
        # ... but not for the last ten minutes: it is off for the table, or far behind
        (10_000.0, 5_000, 600.0, True),
    ],
)
def test_needs_analyze(
    reltuples: float, changed: int, autoanalyzed_ago: float | None, analyze: bool
) -> None:
    assert needs_analyze(reltuples, changed, autoanalyzed_ago) is analyze


@pytest.mark.parametrize("state", ["failed", "cancelled"])  # rare states: none here
def test_a_job_list_filtered_by_state_walks_the_state_index(
    analyzed: wai.Client, state: str
) -> None:
    # the plan PostgreSQL makes for the parameters as psycopg sends them (not prepared)
    with analyzed._connection() as conn:
        cur = conn.execute(
            "EXPLAIN " + query("job_list", analyzed.schema),
            job_list_params(state=state, limit=50),
            prepare=False,
        )
        plan = "\n".join(row[0] for row in cur.fetchall())
    assert "jobs_state_idx" in plan, plan
    assert "Seq Scan" not in plan, plan


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        ({}, "jobs_pkey"),
        ({"state": "failed"}, "jobs_state_idx"),
        ({"kind": "work"}, "jobs_pkey"),
    ],
)
def test_a_job_list_by_time_reads_an_id_range_found_on_the_primary_key(
    analyzed: wai.Client, filters: dict[str, Any], index: str
) -> None:
    # no index serves created_at: the bounds become bounds of the index the listing walks
    now = datetime.now(UTC)
    params = job_list_params(
        created_after=now - timedelta(hours=1), created_before=now, limit=50, **filters
    )
    with analyzed._connection() as conn:
        cur = conn.execute("EXPLAIN " + query("job_list", analyzed.schema), params, prepare=False)
        plan = "\n".join(row[0] for row in cur.fetchall())
    assert "Seq Scan" not in plan, plan
    assert "Recursive Union" in plan, plan  # the binary search
    lines = plan.splitlines()
    # the listing's scan: the index, its condition the id bounds the search found (an
    # init plan's value: `$n` up to PostgreSQL 16, `(InitPlan n).col1` from 17 on)
    param = r"(?:\$\d+|\(InitPlan \d+\)\.col\d+)"
    bounded = [
        lines[i - 1]
        for i, line in enumerate(lines)
        if "Index Cond" in line and re.search(rf"id >= {param}\).*\(id <= {param}\)", line)
    ]
    assert bounded, plan
    assert re.search(rf"(Bitmap Index Scan on|using) {index}\b", bounded[0]), plan


def test_the_flow_gauges_read_no_job_without_an_ordering_key(analyzed: wai.Client) -> None:
    # the metrics read these every pass: their cost must not grow with the plain jobs
    with analyzed._connection() as conn:
        cur = conn.execute(f"EXPLAIN {query('queue_flow_figures', analyzed.schema)}")
        plan = "\n".join(row[0] for row in cur.fetchall())
    assert "Seq Scan on jobs" not in plan, plan
    indexes = set(re.findall(r" using (\w+) on jobs\b", plan))
    assert indexes, plan
    assert indexes <= {"jobs_ordering_idx"}, plan
