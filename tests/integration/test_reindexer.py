"""The leader's index rebuilds: bloated indexes of the jobs table rebuilt, leftovers of
interrupted rebuilds dropped, nothing rebuilt behind an old transaction or a held lock."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import psycopg
import pytest
from psycopg import sql

import wai
from tests.integration._helpers import Work
from wai.maintenance import Reindexer, ReindexerResult
from wai.maintenance import _queries as maintenance_db
from wai.maintenance.reindexer import (
    BLOAT_FACTOR,
    HEAP_SHARE,
    after_hold_floor,
    expected_bytes,
    needs_rebuild,
)

#: Small enough for the few thousand rows a test writes (the default is 32 MiB).
MIN_BYTES = 64 * 1024


def _sizes(client: wai.Client) -> dict[str, tuple[bool, int]]:
    with client._connection() as conn:
        rows = conn.execute(
            "SELECT i.relname, x.indisvalid, pg_relation_size(i.oid) FROM pg_index AS x "
            "JOIN pg_class AS i ON i.oid = x.indexrelid WHERE x.indrelid = %s::regclass",
            [f'"{client.schema}".jobs'],
        ).fetchall()
    return {str(name): (bool(valid), int(size)) for name, valid, size in rows}


def _bloat(client: wai.Client, database_url: str, *, jobs: int = 20_000, kept: int = 100) -> None:
    """``jobs`` available jobs, all but ``kept`` deleted and vacuumed away: their index
    pages stay, empty, as after a long-held snapshot."""
    client.insert_many([Work() for _ in range(jobs)])
    table = sql.Identifier(client.schema, "jobs")
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DELETE FROM {t} WHERE id > (SELECT min(id) FROM {t}) + %s").format(t=table),
            [kept - 1],
        )
        conn.execute(sql.SQL("VACUUM {}").format(table))


async def _pass_behind_a_snapshot(
    reindexer: Reindexer, client: wai.Client, database_url: str
) -> ReindexerResult:
    """One pass while a REPEATABLE READ transaction that read the jobs table is open (past
    the tests' ``old_transaction`` of 0.2 s); the snapshot is released before returning."""
    table = sql.Identifier(client.schema, "jobs")
    with psycopg.connect(database_url) as holder:
        holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        holder.execute(sql.SQL("SELECT id FROM {} LIMIT 1").format(table))
        await asyncio.sleep(0.5)
        result = await reindexer.run_once()
        holder.rollback()
    return result


async def test_bloated_indexes_are_rebuilt_one_a_pass_and_the_queue_still_works(
    aclient: wai.AsyncClient, sclient: wai.Client, database_url: str
) -> None:
    _bloat(sclient, database_url)
    before = _sizes(sclient)
    reindexer = Reindexer(aclient.pool, aclient.schema, interval=60, min_bytes=MIN_BYTES)

    first = await reindexer.run_once()
    assert reindexer.next_wait() == 1.0  # another index waits: the next pass comes soon
    second = await reindexer.run_once()
    assert reindexer.next_wait() == 60  # none left
    third = await reindexer.run_once()

    # the primary key and the ready index held 20,000 entries; 100 are left
    assert {first.rebuilt, second.rebuilt} == {"jobs_pkey", "jobs_ready_idx"}
    assert third.rebuilt is None
    assert third.skipped is None
    after = _sizes(sclient)
    for result in (first, second):
        assert result.rebuilt is not None
        assert result.before == before[result.rebuilt][1]
        assert result.after == after[result.rebuilt][1]
        assert result.after * 4 < result.before
    assert after.keys() == before.keys()  # no index gained or lost
    assert all(valid for valid, _ in after.values())
    # the rebuilt indexes serve the queue: the 100 jobs left are claimed and run
    done = 0
    all_done = asyncio.Event()

    @aclient.task(Work)
    async def work(job: wai.Job[Work]) -> None:
        nonlocal done
        done += 1
        if done == 100:
            all_done.set()

    await aclient.start({"default": 32}, maintenance=False)
    try:
        async with asyncio.timeout(30):
            await all_done.wait()
    finally:
        await aclient.shutdown()


async def test_leftovers_of_interrupted_rebuilds_are_dropped_and_nothing_else(
    aclient: wai.AsyncClient, sclient: wai.Client, database_url: str
) -> None:
    sclient.insert_many([Work(), Work()])  # two rows of one kind: a unique index fails
    table = sql.Identifier(sclient.schema, "jobs")
    with psycopg.connect(database_url, autocommit=True) as conn:
        # What an interrupted REINDEX CONCURRENTLY leaves: an invalid index named _ccnew.
        # A failed CREATE INDEX CONCURRENTLY of the user's own is invalid too, and stays.
        for name in ("jobs_ready_idx_ccnew", "mine_idx"):
            with pytest.raises(psycopg.errors.UniqueViolation):
                conn.execute(
                    sql.SQL("CREATE UNIQUE INDEX CONCURRENTLY {} ON {} (kind)").format(
                        sql.Identifier(name), table
                    )
                )
    assert _sizes(sclient)["jobs_ready_idx_ccnew"][0] is False
    reindexer = Reindexer(aclient.pool, aclient.schema, interval=60, min_bytes=MIN_BYTES)

    result = await reindexer.run_once()

    assert result.dropped == ["jobs_ready_idx_ccnew"]
    sizes = _sizes(sclient)
    assert "jobs_ready_idx_ccnew" not in sizes
    assert sizes["mine_idx"][0] is False  # not wai's: left to its owner


async def test_nothing_is_rebuilt_while_an_old_transaction_is_open_nor_before_a_vacuum(
    aclient: wai.AsyncClient, sclient: wai.Client, database_url: str
) -> None:
    """A rebuild would wait for that snapshot, and vacuum has not removed what it sees;
    once it is released, the table's next vacuum comes first."""
    _bloat(sclient, database_url)
    reindexer = Reindexer(
        aclient.pool, aclient.schema, interval=60, min_bytes=MIN_BYTES, old_transaction=0.2
    )
    table = sql.Identifier(sclient.schema, "jobs")
    held = await _pass_behind_a_snapshot(reindexer, sclient, database_url)
    assert held.rebuilt is None
    assert held.skipped == "old transaction"
    # The rows the snapshot kept wait for vacuum (this server runs without autovacuum):
    # a rebuild now would scan them all.
    # A vacuum running as the snapshot ends may have begun before and removed nothing: the
    # second to end after the release is the one that began after it.
    released = await reindexer.run_once()
    assert released.rebuilt is None
    assert released.skipped == "vacuum pending"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("VACUUM {}").format(table))
        once = await reindexer.run_once()
        assert once.skipped == "vacuum pending"
        conn.execute(sql.SQL("VACUUM {}").format(table))
    twice = await reindexer.run_once()
    assert twice.rebuilt is not None
    again = await reindexer.run_once()  # the other bloated index: no wait any more
    assert again.rebuilt is not None


async def test_statistics_reset_after_a_held_snapshot_do_not_stop_rebuilds(
    aclient: wai.AsyncClient, sclient: wai.Client, database_url: str
) -> None:
    """The vacuums are counted by the table's statistics: reset, the count goes back, and
    the wait counts from there rather than for vacuums that will never be counted."""
    _bloat(sclient, database_url)  # one vacuum counted already
    reindexer = Reindexer(
        aclient.pool, aclient.schema, interval=60, min_bytes=MIN_BYTES, old_transaction=0.2
    )
    table = sql.Identifier(sclient.schema, "jobs")
    held = await _pass_behind_a_snapshot(reindexer, sclient, database_url)
    assert held.skipped == "old transaction"
    assert (await reindexer.run_once()).skipped == "vacuum pending"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_stat_reset_single_table_counters(%s::regclass)",
            [f'"{sclient.schema}".jobs'],
        )
        assert (await reindexer.run_once()).skipped == "vacuum pending"  # counts from 0 now
        conn.execute(sql.SQL("VACUUM {}").format(table))
        conn.execute(sql.SQL("VACUUM {}").format(table))
    rebuilt = await reindexer.run_once()
    assert rebuilt.rebuilt is not None


async def test_after_a_held_snapshot_smaller_bloated_indexes_are_rebuilt_once(
    aclient: wai.AsyncClient, sclient: wai.Client, database_url: str
) -> None:
    """Below the usual floor a bloated index is left alone, unless a held snapshot made it
    grow: the sweep after the snapshot's rows are vacuumed rebuilds it, for a while."""
    _bloat(sclient, database_url)
    reindexer = Reindexer(
        aclient.pool,
        aclient.schema,
        interval=60,
        min_bytes=2**40,  # nothing is ever large enough for the usual rebuild
        after_hold_min_bytes=MIN_BYTES,
        sweep=5.0,
        spacing=0.0,  # the floor alone decides below
        old_transaction=0.2,
    )
    before = _sizes(sclient)
    clean = await reindexer.run_once()
    assert (clean.rebuilt, clean.skipped) == (None, None)  # small, so left alone
    table = sql.Identifier(sclient.schema, "jobs")
    held = await _pass_behind_a_snapshot(reindexer, sclient, database_url)
    assert held.skipped == "old transaction"
    assert (await reindexer.run_once()).skipped == "vacuum pending"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("VACUUM {}").format(table))
        conn.execute(sql.SQL("VACUUM {}").format(table))
    first = await reindexer.run_once()
    second = await reindexer.run_once()
    over = await reindexer.run_once()

    assert {first.rebuilt, second.rebuilt} == {"jobs_pkey", "jobs_ready_idx"}
    for result in (first, second):
        assert result.rebuilt is not None
        assert result.before == before[result.rebuilt][1]
        assert result.after * 4 < result.before
    assert (over.rebuilt, over.skipped) == (None, None)
    # Once the sweep is over, bloat again, without a held snapshot this time: the same small
    # indexes stay as they are.
    await asyncio.sleep(5.0)
    _bloat(sclient, database_url)
    assert (await reindexer.run_once()).rebuilt is None


async def test_a_rebuild_behind_a_held_lock_gives_up_and_waits_its_spacing(
    aclient: wai.AsyncClient, sclient: wai.Client, database_url: str
) -> None:
    _bloat(sclient, database_url)
    reindexer = Reindexer(
        aclient.pool, aclient.schema, interval=60, min_bytes=MIN_BYTES, lock_wait=0.2
    )
    table = sql.Identifier(sclient.schema, "jobs")
    with psycopg.connect(database_url) as holder:  # the lock a VACUUM or an ANALYZE takes
        holder.execute(sql.SQL("LOCK TABLE {} IN SHARE UPDATE EXCLUSIVE MODE").format(table))
        locked = await reindexer.run_once()
        holder.rollback()
    assert locked.rebuilt is None
    assert locked.skipped == "lock wait"
    assert all(valid for valid, _ in _sizes(sclient).values())  # nothing half-built left
    nxt = await reindexer.run_once()
    # the other bloated index is rebuilt; the one that gave up waits its spacing
    assert nxt.rebuilt is not None
    last = await reindexer.run_once()
    assert last.rebuilt is None
    assert last.skipped == "spaced"


async def test_a_role_that_may_not_rebuild_is_told_once(
    aclient: wai.AsyncClient, sclient: wai.Client, database_url: str, caplog: Any
) -> None:
    _bloat(sclient, database_url)
    role = f"{sclient.schema}_reader"
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                sql.Identifier(sclient.schema), sql.Identifier(role)
            )
        )
    try:
        url = database_url.replace("postgres@", f"{role}@", 1)
        client = wai.AsyncClient(url, schema=sclient.schema)
        await client.open()
        try:
            reindexer = Reindexer(client.pool, client.schema, interval=60, min_bytes=MIN_BYTES)
            caplog.set_level("WARNING", logger="wai.maintenance")
            first = await reindexer.run_once()
            second = await reindexer.run_once()
        finally:
            await client.close()
    finally:
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP OWNED BY {}; DROP ROLE {}").format(
                    sql.Identifier(role), sql.Identifier(role)
                )
            )
    assert first.rebuilt is None
    assert second.rebuilt is None
    told = [r for r in caplog.records if "cannot rebuild the indexes" in r.getMessage()]
    assert len(told) == 1


async def test_a_session_that_cannot_be_opened_skips_the_pass_and_is_told_once(
    aclient: wai.AsyncClient, sclient: wai.Client, database_url: str, caplog: Any
) -> None:
    _bloat(sclient, database_url)
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reindexer = Reindexer(
        aclient.pool,
        aclient.schema,
        interval=60,
        min_bytes=MIN_BYTES,
        url=f"postgresql://postgres@127.0.0.1:{port}/postgres?connect_timeout=2",
    )
    caplog.set_level("WARNING", logger="wai.maintenance")
    first = await reindexer.run_once()
    second = await reindexer.run_once()
    assert first.skipped == second.skipped == "no session"
    told = [r for r in caplog.records if "cannot open a session" in r.getMessage()]
    assert len(told) == 1


async def test_only_btree_indexes_on_plain_columns_are_weighed(
    aclient: wai.AsyncClient, sclient: wai.Client
) -> None:
    """A GIN or an expression index takes another size per entry than a btree's."""
    table = sql.Identifier(sclient.schema, "jobs")
    with sclient._connection() as conn:
        conn.execute(sql.SQL("CREATE INDEX mine_gin ON {} USING gin (metadata)").format(table))
        conn.execute(sql.SQL("CREATE INDEX mine_expr ON {} ((lower(kind)))").format(table))
        conn.execute(sql.SQL("CREATE INDEX mine_btree ON {} (kind, created_at)").format(table))
    async with aclient.pool.connection() as conn:
        weighed = {row[0] for row in await maintenance_db.jobs_index_sizes(conn, aclient.schema)}
    assert "mine_btree" in weighed
    assert "jobs_pkey" in weighed
    assert not weighed & {"mine_gin", "mine_expr"}


@pytest.mark.parametrize(
    ("size", "entries", "width", "rebuild"),
    [
        (MIN_BYTES - 1, 0.0, 24.0, False),  # nearly empty, but too small to bother
        (2 * MIN_BYTES, 0.0, 24.0, True),
        # 1,000 entries of 24 bytes may take 64 KiB in ordinary use: 4x that is bloat
        (int(BLOAT_FACTOR * expected_bytes(1000, 24)), 1000.0, 24.0, False),
        (int(BLOAT_FACTOR * expected_bytes(1000, 24)) + 1, 1000.0, 24.0, True),
        # a held snapshot's index: big, but its entries are counted too
        (300 * 2**20, 5_000_000.0, 24.0, False),
        (300 * 2**20, 100_000.0, 24.0, True),
    ],
)
def test_needs_rebuild(size: int, entries: float, width: float, rebuild: bool) -> None:
    assert needs_rebuild(size, entries, width, min_bytes=MIN_BYTES) is rebuild


@pytest.mark.parametrize(
    ("heap", "floor"),
    [
        (0, 2**20),  # a truncated heap: the after-hold least size
        (HEAP_SHARE * 4 * 2**20, 4 * 2**20),  # a larger heap: its share, the scan's worth
        (HEAP_SHARE * 2**40, 32 * 2**20),  # never above the usual floor
    ],
)
def test_after_hold_floor(heap: int, floor: int) -> None:
    assert after_hold_floor(32 * 2**20, 2**20, heap) == floor
