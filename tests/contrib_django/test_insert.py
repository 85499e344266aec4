"""``wai.contrib.django.insert_job`` in Django's transactions, on the real database."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import psycopg
import pytest
from django.db import connection, transaction

import wai
from wai.contrib.django import database_url, insert_job
from wai.contrib.django._insert import psycopg_connection

pytestmark = pytest.mark.django_db(transaction=True)

#: Django ships no types: its decorator-or-context-manager, as the tests use it.
atomic = cast("Any", transaction.atomic)


@dataclass
class Greet:
    name: str


class Boom(Exception):
    pass


@pytest.fixture
def observer() -> Iterator[psycopg.Connection[Any]]:
    """A second connection to the test database: it sees only what is committed."""
    with psycopg.connect(database_url(), autocommit=True) as conn:
        yield conn


@pytest.fixture
def queue() -> str:
    return f"dj_{uuid.uuid4().hex[:12]}"


def _committed(conn: psycopg.Connection[Any], job_id: int) -> bool:
    return conn.execute("SELECT 1 FROM wai.jobs WHERE id = %s", (job_id,)).fetchone() is not None


def test_job_commits_with_the_atomic_block(observer: psycopg.Connection[Any], queue: str) -> None:
    with atomic():
        row = insert_job(Greet("ada"), queue=queue)
        assert not _committed(observer, row.id)  # not before the block commits
    assert _committed(observer, row.id)
    assert row.queue == queue
    assert row.args == {"name": "ada"}


def test_job_is_gone_when_the_atomic_block_raises(
    observer: psycopg.Connection[Any], queue: str
) -> None:
    ids: list[int] = []

    @atomic
    def insert_then_fail() -> None:
        ids.append(insert_job(Greet("bob"), queue=queue).id)
        raise Boom

    with pytest.raises(Boom):
        insert_then_fail()
    assert ids
    assert not _committed(observer, ids[0])


def test_nested_atomic_rollback_removes_only_its_job(
    observer: psycopg.Connection[Any], queue: str
) -> None:
    inner: list[int] = []
    with atomic():
        outer = insert_job(Greet("outer"), queue=queue)
        try:
            with atomic():  # a savepoint
                inner.append(insert_job(Greet("inner"), queue=queue).id)
                raise Boom
        except Boom:
            pass
    assert _committed(observer, outer.id)
    assert not _committed(observer, inner[0])


def test_autocommit_insert_is_its_own_statement(
    observer: psycopg.Connection[Any], queue: str
) -> None:
    assert connection.get_autocommit()
    row = insert_job({"name": "cy"}, kind="greet_dict", queue=queue, priority=3, tags=["a"])
    assert _committed(observer, row.id)
    assert (row.kind, row.priority, row.tags) == ("greet_dict", 3, ("a",))


def test_a_worker_runs_the_job_once_it_is_committed(queue: str) -> None:
    seen: list[str] = []

    def burst() -> None:
        """A burst worker of a fresh client (a closed pool does not reopen)."""
        client = wai.AsyncClient(database_url(), schema="wai", max_connections=2)

        @client.task(Greet, queue=queue)
        async def greet(job: wai.Job[Greet]) -> None:  # pyright: ignore[reportUnusedFunction]
            seen.append(job.args.name)

        async def run() -> None:
            async with client:
                await asyncio.wait_for(client.run({queue: 1}, burst=True, poll_interval=0.1), 30)

        asyncio.run(run())

    with atomic():
        row = insert_job(Greet("dee"), queue=queue)
        burst()  # the job is not committed: nothing to claim
        assert seen == []
    burst()
    assert seen == ["dee"]
    with psycopg.connect(database_url()) as conn:
        state = conn.execute("SELECT state FROM wai.jobs WHERE id = %s", (row.id,)).fetchone()
    assert state == ("completed",)


def test_an_unknown_alias_is_refused() -> None:
    with pytest.raises(wai.ValidationError, match="no alias 'other'"):
        insert_job(Greet("x"), using="other")


def test_the_django_connection_is_psycopg_3() -> None:
    connection.ensure_connection()
    assert psycopg_connection(connection.connection) is connection.connection
