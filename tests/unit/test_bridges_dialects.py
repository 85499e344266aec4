"""wai.bridges.sqlalchemy serves the psycopg and asyncpg dialects and names any other.

The dialect objects are SQLAlchemy's own; none of them connects (the drivers of the
refused ones need not be installed).
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import Dialect
from sqlalchemy.dialects.postgresql.asyncpg import PGDialect_asyncpg
from sqlalchemy.dialects.postgresql.pg8000 import PGDialect_pg8000
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg, PGDialectAsync_psycopg
from sqlalchemy.dialects.postgresql.psycopg2 import PGDialect_psycopg2
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

import wai
from wai.bridges.sqlalchemy import _driver  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize(
    ("dialect", "is_async", "driver"),
    [
        (PGDialect_psycopg(), False, "psycopg"),
        (PGDialectAsync_psycopg(), True, "psycopg"),
        (PGDialect_asyncpg(), True, "asyncpg"),
    ],
)
def test_served_dialects(dialect: Dialect, is_async: bool, driver: str) -> None:
    assert _driver(dialect, is_async=is_async) == driver


@pytest.mark.parametrize(
    ("dialect", "is_async", "named"),
    [
        (PGDialect_psycopg2(), False, "not postgresql+psycopg2"),
        (PGDialect_psycopg2(), True, "not postgresql+psycopg2"),
        (PGDialect_pg8000(), False, "not postgresql+pg8000"),
        (SQLiteDialect_pysqlite(), False, "not sqlite+pysqlite"),
        (PGDialect_asyncpg(), False, "postgresql+asyncpg is an asyncio dialect"),
        (PGDialectAsync_psycopg(), False, "postgresql+psycopg is an asyncio dialect"),
    ],
)
def test_other_dialects_are_refused_by_name(dialect: Dialect, is_async: bool, named: str) -> None:
    with pytest.raises(wai.ValidationError, match=re.escape(named)):
        _driver(dialect, is_async=is_async)
