"""Shared args types and raw-SQL helpers for the tests.

The helpers open their own short-lived connection, so what they see is what
any other session sees: committed rows only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, LiteralString

import msgspec
import psycopg
import pydantic
import pytest
from psycopg import sql

from wai.errors import SerializationError, ValidationError


@dataclass
class SendEmail:
    """The everyday args type: kind ``send_email``."""

    to: str
    subject: str = "hello"


@dataclass
class HTMLToPDF:
    """Kind ``html_to_pdf``."""

    url: str


@dataclass
class Counter:
    """Numbered args, for batches and paging."""

    n: int


class ChargeCard(pydantic.BaseModel):
    """A pydantic args type: kind ``charge_card``."""

    card_id: str
    cents: int


class ResizeImage(msgspec.Struct):
    """A msgspec args type: kind ``resize_image``."""

    path: str
    width: int


#: Hostile strings that must be rejected as names, or stored verbatim as data.
HOSTILE = "x'; DROP TABLE wai.jobs; --"


def _query(url: str, query: sql.Composed | sql.SQL, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()


def count_jobs(
    url: str, where: LiteralString = "true", params: Any = None, *, schema: str = "wai"
) -> int:
    """``SELECT count(*) FROM <schema>.jobs WHERE <where>``, on a connection of its own."""
    query = sql.SQL("SELECT count(*) FROM {}.jobs WHERE ").format(sql.Identifier(schema))
    rows = _query(url, query + sql.SQL(where), params)
    return int(rows[0][0])


def count_rows(url: str, table: str) -> int:
    """``SELECT count(*) FROM <table>`` (an unqualified table name)."""
    rows = _query(url, sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
    return int(rows[0][0])


def set_state(url: str, job_id: int, state: str, *, schema: str = "wai") -> None:
    """Force a job into ``state``, as a worker or maintenance would have."""
    _query(
        url,
        sql.SQL(
            "UPDATE {s}.jobs SET state = %s::{s}.job_state,"
            " finalized_at = CASE WHEN %s IN ('completed', 'failed', 'cancelled')"
            " THEN now() END WHERE id = %s RETURNING id"
        ).format(s=sql.Identifier(schema)),
        (state, state, job_id),
    )


def execute(url: str, statement: LiteralString, params: Any = None) -> None:
    """Run one statement of the test's own (DDL, business rows) and commit it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement, params)


def table_exists(url: str, qualified_name: str) -> bool:
    """Whether ``to_regclass(qualified_name)`` finds a relation."""
    rows = _query(url, sql.SQL("SELECT to_regclass(%s) IS NOT NULL"), (qualified_name,))
    return bool(rows[0][0])


def bad_inserts() -> list[Any]:
    """``pytest.param(args, options, error)`` for inserts that must write nothing.

    Shared by the sync and async insert tests.
    """
    ok = SendEmail(to="a@example.com")
    p = pytest.param
    return [
        p(SendEmail(to="nul\x00@example.com"), {}, ValidationError, id="nul-in-args"),
        p({"k\x00": 1}, {"kind": "k"}, ValidationError, id="nul-in-args-key"),
        p(ok, {"metadata": {"note": "a\x00b"}}, ValidationError, id="nul-in-metadata"),
        p(ok, {"tags": ["ok", "bad\x00"]}, ValidationError, id="nul-in-tag"),
        p(ok, {"ordering_key": "k\x00"}, ValidationError, id="nul-in-ordering-key"),
        p({"s": {1, 2}}, {"kind": "k"}, SerializationError, id="set-in-args"),
        p({"at": datetime.now(UTC)}, {"kind": "k"}, SerializationError, id="datetime-in-dict"),
        p({"x": math.nan}, {"kind": "k"}, SerializationError, id="nan-in-args"),
        p({"s": "\ud800"}, {"kind": "k"}, ValidationError, id="lone-surrogate-in-args"),
        p({"n": [{"d": "\x00"}]}, {"kind": "k"}, ValidationError, id="nul-nested-in-args"),
        p(SendEmail(to="\udfff"), {}, ValidationError, id="lone-surrogate-in-flat-args"),
        p(ok, {"metadata": {"\ud800": 1}}, ValidationError, id="lone-surrogate-metadata-key"),
        p(ok, {"ordering_key": "\ud800"}, ValidationError, id="lone-surrogate-ordering-key"),
        p(ok, {"tags": ["\udc00"]}, ValidationError, id="lone-surrogate-in-tag"),
        p(ok, {"metadata": {"b": b"x"}}, SerializationError, id="bytes-in-metadata"),
        p(ok, {"metadata": ["not", "a", "dict"]}, ValidationError, id="metadata-not-dict"),
        p([1, 2], {"kind": "k"}, SerializationError, id="list-as-args"),
        p({"a": 1}, {}, ValidationError, id="dict-without-kind"),
        p(ok, {"priority": 0}, ValidationError, id="priority-0"),
        p(ok, {"priority": 5}, ValidationError, id="priority-5"),
        p(ok, {"priority": True}, ValidationError, id="priority-true"),
        p(ok, {"max_attempts": 0}, ValidationError, id="max-attempts-0"),
        p(ok, {"max_attempts": 1001}, ValidationError, id="max-attempts-1001"),
        p(ok, {"queue": ""}, ValidationError, id="queue-empty"),
        p(ok, {"queue": "a b"}, ValidationError, id="queue-space"),
        p(ok, {"queue": "q" * 300}, ValidationError, id="queue-300-chars"),
        p(ok, {"queue": HOSTILE}, ValidationError, id="queue-hostile"),
        p(ok, {"kind": HOSTILE}, ValidationError, id="kind-hostile"),
        p(ok, {"kind": ""}, ValidationError, id="kind-empty"),
        p(ok, {"kind": "k" * 300}, ValidationError, id="kind-300-chars"),
        p(ok, {"tags": [f"t{i}" for i in range(21)]}, ValidationError, id="too-many-tags"),
        p(ok, {"tags": "one-string"}, ValidationError, id="tags-as-string"),
        p(
            ok,
            {"run_at": datetime.now() + timedelta(hours=1)},  # naive: the point
            ValidationError,
            id="naive-run-at",
        ),
        p(
            ok,
            {"run_at": datetime.max.replace(tzinfo=timezone(timedelta(hours=-5)))},
            ValidationError,
            id="run-at-beyond-year-9999-utc",
        ),
        p(
            ok,
            {"run_at": datetime.min.replace(tzinfo=timezone(timedelta(hours=5)))},
            ValidationError,
            id="run-at-before-year-1-utc",
        ),
    ]
