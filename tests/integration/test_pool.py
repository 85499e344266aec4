"""The clients' pools lend the connection returned last, and stay pools while doing it."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

import wai
from wai import _pool


def _backend(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


async def _backend_async(conn: psycopg.AsyncConnection[Any]) -> int:
    cur = await conn.execute("SELECT pg_backend_pid()")
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def test_the_async_pool_lends_the_connection_returned_last(shared_database_url: str) -> None:
    async with wai.AsyncClient(shared_database_url, min_connections=3) as client:
        pool = client.pool
        await pool.wait()
        first, second, third = [await pool.getconn() for _ in range(3)]
        pids = [await _backend_async(c) for c in (first, second, third)]
        assert len(set(pids)) == 3
        for conn in (first, second, third):
            await pool.putconn(conn)
        # A queue would lend `first`, idle the longest; the stack lends `third` again and
        # again while one caller at a time borrows.
        for _ in range(5):
            conn = await pool.getconn()
            try:
                assert await _backend_async(conn) == pids[2]
            finally:
                await pool.putconn(conn)
        # Taken in turn, the others come out newest first; the pool's own accounting holds.
        taken = [await pool.getconn() for _ in range(3)]
        assert [await _backend_async(c) for c in taken] == [pids[2], pids[1], pids[0]]
        assert pool.get_stats()["pool_available"] == 0
        for conn in taken:
            await pool.putconn(conn)
        assert pool.get_stats()["pool_available"] == 3


async def test_a_waiting_caller_still_gets_the_connection_returned(
    shared_database_url: str,
) -> None:
    async with wai.AsyncClient(shared_database_url, min_connections=1, max_connections=1) as client:
        pool = client.pool
        held = await pool.getconn()
        waiter = asyncio.create_task(pool.getconn(timeout=10))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        await pool.putconn(held)
        got = await asyncio.wait_for(waiter, 10)
        assert got is held
        await pool.putconn(got)


def test_the_sync_pool_lends_the_connection_returned_last(shared_database_url: str) -> None:
    with wai.Client(shared_database_url, min_connections=2) as client:
        pool = client.pool
        pool.wait()
        first, second = pool.getconn(), pool.getconn()
        pids = [_backend(first), _backend(second)]
        assert pids[0] != pids[1]
        pool.putconn(first)
        pool.putconn(second)
        for _ in range(3):
            with pool.connection() as conn:
                assert _backend(conn) == pids[1]


async def test_only_a_connection_idle_for_long_is_checked_before_it_is_lent(
    shared_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[int] = []
    real = AsyncConnectionPool.check_connection

    async def counting(conn: psycopg.AsyncConnection[Any]) -> None:
        checked.append(id(conn))
        await real(conn)

    monkeypatch.setattr(AsyncConnectionPool, "check_connection", staticmethod(counting))
    async with wai.AsyncClient(shared_database_url, min_connections=1) as client:
        pool = client.pool
        await pool.wait()
        for _ in range(4):  # never returned yet, then returned a moment ago
            async with pool.connection() as conn:
                await conn.execute("SELECT 1")
        assert len(checked) == 1
        monkeypatch.setattr(_pool, "IDLE_CHECK", 0.0)  # every connection counts as idle long
        for _ in range(3):
            async with pool.connection() as conn:
                await conn.execute("SELECT 1")
        assert len(checked) == 4


async def test_a_dropped_idle_connection_is_replaced_instead_of_failing_an_insert(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_pool, "IDLE_CHECK", 0.0)
    async with wai.AsyncClient(database_url, min_connections=1, max_connections=1) as client:
        pool = client.pool
        async with pool.connection() as conn:
            dropped = await _backend_async(conn)
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (dropped,))
        row = await client.insert({"n": 1}, kind="pool_probe")  # on a new connection
        assert row.state is wai.JobState.AVAILABLE
        async with pool.connection() as conn:
            assert await _backend_async(conn) != dropped
        assert pool.get_stats()["connections_lost"] == 1


def test_a_dropped_idle_connection_is_replaced_in_the_sync_pool(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_pool, "IDLE_CHECK", 0.0)
    with wai.Client(database_url, min_connections=1, max_connections=1) as client:
        with client.pool.connection() as conn:
            dropped = _backend(conn)
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (dropped,))
        row = client.insert({"n": 1}, kind="pool_probe")
        assert row.state is wai.JobState.AVAILABLE
        with client.pool.connection() as conn:
            assert _backend(conn) != dropped


async def test_pooled_connections_keep_alive_unless_the_url_says_otherwise(
    shared_database_url: str,
) -> None:
    async with wai.AsyncClient(shared_database_url) as client, client.pool.connection() as conn:
        params = conn.info.get_parameters()
    assert (params["keepalives"], params["keepalives_idle"]) == ("1", "10")
    sep = "&" if "?" in shared_database_url else "?"
    own = f"{shared_database_url}{sep}keepalives_idle=120"
    async with wai.AsyncClient(own) as client, client.pool.connection() as conn:
        params = conn.info.get_parameters()
    assert params["keepalives_idle"] == "120"
    assert "keepalives_count" not in params
