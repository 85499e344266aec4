"""The hot statements' generic plans: a primary-key probe per row, never a table scan.

psycopg prepares a statement after a few executions and PostgreSQL may then keep one
generic plan for it, made without the parameter values and from whatever statistics
the table has. These tests build that plan on purpose (``plan_cache_mode =
force_generic_plan``) on a table whose statistics say nothing is running, the state
in which a generic plan once scanned every running row per batch.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg._queries import PostgresQuery  # pyright: ignore[reportPrivateImportUsage]

import wai
from tests.integration._helpers import Work
from wai._db import _claim_query  # pyright: ignore[reportPrivateUsage]
from wai._sql import query

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
    "queue": "q",
    "limit": 32,
    "deadline_kinds": ["work"],
    "deadline_seconds": [5.0],
    "default_deadline": None,
}


def generic_plan(conn: psycopg.Connection[Any], name: str, schema: str) -> str:
    converted = PostgresQuery(psycopg.adapt.Transformer(conn))
    # the claim runs with its limit written in the text (see _claim_query)
    text = _claim_query(schema, 32) if name == "job_claim" else query(name, schema)
    converted.convert(text, PARAMS)
    text = converted.query.decode()
    nulls = ", ".join("NULL" for _ in converted.params or ())
    with conn.transaction():
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE hot AS {text}".replace("%", "%%"))  # pyright: ignore[reportArgumentType]
        try:
            cur = conn.execute(f"EXPLAIN EXECUTE hot({nulls})")  # pyright: ignore[reportArgumentType]
            return "\n".join(row[0] for row in cur.fetchall())
        finally:
            conn.execute("DEALLOCATE hot")


@pytest.fixture
def analyzed(sclient: wai.Client) -> wai.Client:
    """2,000 available and 2,000 completed jobs, analyzed while none is running."""
    sclient.insert_many([Work() for _ in range(2000)])
    with sclient.connection() as conn:
        conn.execute(f"UPDATE {sclient.schema}.jobs SET state = 'completed' WHERE id % 2 = 0")
        conn.execute(f"ANALYZE {sclient.schema}.jobs")
    return sclient


@pytest.mark.parametrize(
    "name", ["job_claim", "job_finalize_many", "job_finalize_many_ids", "job_heartbeat_many"]
)
def test_the_generic_plan_finds_rows_by_primary_key(analyzed: wai.Client, name: str) -> None:
    with analyzed.connection() as conn:
        plan = generic_plan(conn, name, analyzed.schema)
    assert "jobs_pkey" in plan, plan
    assert "Seq Scan on jobs" not in plan, plan
    assert "jobs_running_idx" not in plan, plan
    assert "Hash Join" not in plan, plan


def test_the_claim_is_prepared_with_its_limit_in_the_text() -> None:
    text = _claim_query("wai", 32)
    assert "LIMIT 32\n" in text
    assert "%(limit)s" not in text
    assert _claim_query("wai", 32) is text  # one text, hence one prepared statement, per limit
