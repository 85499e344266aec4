"""Inserts through wai.AsyncClient, its transactions and wai.bridge.insert_job.

tests/integration/test_insert_sync.py is the parallel file for wai.Client; keep
them in step.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from psycopg.rows import DictRow, dict_row

import wai
from tests.factories import (
    HOSTILE,
    ChargeCard,
    Counter,
    HTMLToPDF,
    ResizeImage,
    SendEmail,
    bad_inserts,
    count_jobs,
    count_rows,
    execute,
    set_state,
)
from wai._unique import unique_key


@dataclass
class RoutedAsync:
    """Registered on queue "routed_async" by a test; used nowhere else."""

    n: int


class Boom(Exception):
    """Raised inside transactions to force a rollback."""


def ids(rows: list[wai.JobRow]) -> list[int]:
    return [r.id for r in rows]


async def insert_then_fail(client: wai.AsyncClient, args: Any, **options: Any) -> None:
    """Insert in a transaction, then raise Boom so that it rolls back."""
    async with client.transaction() as tx:
        await tx.insert(args, **options)
        raise Boom


async def insert_in_transaction(
    client: wai.AsyncClient, items: list[Any], last_options: dict[str, Any]
) -> None:
    """Insert ``items`` in one transaction; the last one with ``last_options``."""
    async with client.transaction() as tx:
        for item in items[:-1]:
            await tx.insert(item)
        await tx.insert(items[-1], **last_options)


# -- insert ----------------------------------------------------------------------------


async def test_insert_defaults(aclient: wai.AsyncClient, database_url: str) -> None:
    row = await aclient.insert(SendEmail(to="a@example.com"))
    assert isinstance(row, wai.JobRow)
    assert row.kind == "send_email"
    assert row.queue == "default"
    assert row.state == "available"
    assert row.state is wai.JobState.AVAILABLE
    assert (row.priority, row.max_attempts, row.attempt, row.run_lease) == (2, 25, 0, 0)
    assert row.args == {"to": "a@example.com", "subject": "hello"}
    assert row.tags == ()
    assert row.metadata == {}
    assert row.errors == ()
    assert row.unique_key is None
    assert row.ordering_key is None
    assert row.trigger is None
    assert row.finalized_at is None
    assert row.attempted_at is None
    assert row.created_at.tzinfo is not None
    assert row.run_at == row.created_at  # now(): the insert transaction's start
    assert await aclient.get_job(row.id) == row
    assert count_jobs(database_url) == 1


async def test_insert_every_option(aclient: wai.AsyncClient, database_url: str) -> None:
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    row = await aclient.insert(
        {"order": 7, "items": ["a", "b"]},
        kind="billing.charge",
        queue="billing",
        priority=1,
        max_attempts=3,
        run_at=when,
        tags=["vip", "eu"],
        metadata={"tenant": "acme", "n": [1, 2]},
        ordering_key="order:7",
    )
    assert row.kind == "billing.charge"
    assert row.queue == "billing"
    assert row.priority == 1
    assert row.max_attempts == 3
    assert row.state == "scheduled"
    assert row.run_at == when
    assert row.tags == ("vip", "eu")
    assert row.metadata == {"tenant": "acme", "n": [1, 2]}
    assert row.ordering_key == "order:7"
    assert row.args == {"order": 7, "items": ["a", "b"]}
    assert await aclient.get_job(row.id) == row
    assert (
        count_jobs(
            database_url,
            "state = 'scheduled' AND kind = 'billing.charge' AND queue = 'billing'"
            " AND priority = 1 AND max_attempts = 3 AND tags = ARRAY['vip', 'eu']"
            ' AND metadata = \'{"tenant": "acme", "n": [1, 2]}\'::jsonb'
            " AND ordering_key = 'order:7' AND run_at = %s",
            (when,),
        )
        == 1
    )


async def test_insert_past_run_at_is_still_scheduled(aclient: wai.AsyncClient) -> None:
    when = datetime.now(UTC) - timedelta(days=1)
    row = await aclient.insert(SendEmail(to="late"), run_at=when)
    assert row.state == "scheduled"
    assert row.run_at == when


async def test_insert_args_types(aclient: wai.AsyncClient) -> None:
    card = await aclient.insert(ChargeCard(card_id="c_1", cents=990))
    image = await aclient.insert(ResizeImage(path="/img.png", width=64))
    pdf = await aclient.insert(HTMLToPDF(url="https://example.com"))
    assert (card.kind, card.args) == ("charge_card", {"card_id": "c_1", "cents": 990})
    assert (image.kind, image.args) == ("resize_image", {"path": "/img.png", "width": 64})
    assert (pdf.kind, pdf.args) == ("html_to_pdf", {"url": "https://example.com"})


async def test_insert_stores_hostile_strings_verbatim(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    row = await aclient.insert(
        {"q": HOSTILE, "quote": "'\"\\", "unicode": "ü\U0001f680"},
        kind="hostile_data",
        tags=[HOSTILE, "$$;--"],
        metadata={HOSTILE: HOSTILE},
        ordering_key=HOSTILE,
    )
    stored = await aclient.get_job(row.id)
    assert stored.args == {"q": HOSTILE, "quote": "'\"\\", "unicode": "ü\U0001f680"}
    assert stored.tags == (HOSTILE, "$$;--")
    assert stored.metadata == {HOSTILE: HOSTILE}
    assert stored.ordering_key == HOSTILE
    assert [r.id for r in await aclient.list_jobs(tag=HOSTILE)] == [row.id]
    assert count_jobs(database_url) == 1  # the table is still there


async def test_insert_on_a_connection_with_another_client_encoding(database_url: str) -> None:
    # a URL asking for LATIN1: wai's own connections speak UTF-8 all the same (the single
    # insert sends UTF-8 text, args are decoded as UTF-8 JSON): no mojibake, no decode error
    sep = "&" if "?" in database_url else "?"
    url = f"{database_url}{sep}options=-c%20client_encoding%3DLATIN1"
    async with wai.AsyncClient(url) as client:
        row = await client.insert({"s": "café"}, kind="latin", tags=["été"])
        stored = await client.get_job(row.id)
    assert stored.args == {"s": "café"}
    assert stored.tags == ("été",)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT args->>'s', tags[1] FROM wai.jobs WHERE id = %s", (row.id,)
        )
        assert await cur.fetchone() == ("café", "été")


async def test_insert_literal_backslash_u0000_is_stored(aclient: wai.AsyncClient) -> None:
    row = await aclient.insert({"s": "\\u0000"}, kind="escaped")
    assert (await aclient.get_job(row.id)).args == {"s": "\\u0000"}


async def test_insert_default_queue_is_the_registered_queue(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    @aclient.task(RoutedAsync, queue="routed_async", max_attempts=5)
    async def handle(job: wai.Job[RoutedAsync]) -> None:  # registration only, never run
        raise AssertionError(job)

    row = await aclient.insert(RoutedAsync(n=1))
    assert (row.queue, row.max_attempts) == ("routed_async", 5)
    explicit = await aclient.insert(RoutedAsync(n=2), queue="elsewhere", max_attempts=2)
    assert (explicit.queue, explicit.max_attempts) == ("elsewhere", 2)
    [many] = await aclient.insert_many([RoutedAsync(n=3)])
    assert many.queue == "routed_async"
    async with aclient.transaction() as tx:
        assert (await tx.insert(RoutedAsync(n=4))).queue == "routed_async"
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        assert (await wai.bridge.insert_job(conn, RoutedAsync(n=5))).queue == "routed_async"
    assert count_jobs(database_url, "queue = 'routed_async'") == 4


async def test_insert_default_queue_of_a_kind_registered_by_name(
    aclient: wai.AsyncClient,
) -> None:
    @aclient.task("report_async", queue="reports_async")
    async def handle(job: wai.Job[dict[str, Any]]) -> None:
        raise AssertionError(job)

    row = await aclient.insert({"month": 5}, kind="report_async")
    assert (row.kind, row.queue) == ("report_async", "reports_async")


# -- unique ----------------------------------------------------------------------------


async def test_unique_duplicate_raises_with_existing_id(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    first = await aclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    assert first.unique_key is not None
    assert len(first.unique_key) == 16
    with pytest.raises(wai.UniqueConflict) as info:
        await aclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    assert info.value.existing_id == first.id
    assert f"job {first.id}" in str(info.value)
    assert "on_conflict='skip'" in str(info.value)
    assert count_jobs(database_url) == 1


async def test_failed_inserts_give_their_connection_back(database_url: str) -> None:
    async with wai.AsyncClient(database_url, max_connections=2) as client:
        await client.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
        for _ in range(10):  # five times the pool: a kept connection would block the rest
            with pytest.raises(wai.UniqueConflict):
                await asyncio.wait_for(
                    client.insert(SendEmail(to="a"), unique=wai.UniqueOpts()), timeout=5
                )
        row = await asyncio.wait_for(client.insert(SendEmail(to="b")), timeout=5)
        assert row.args["to"] == "b"
        assert client.pool.get_stats().get("pool_available", 0) >= 1


async def test_unique_skip_returns_the_existing_job(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    first = await aclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    again = await aclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts(on_conflict="skip"))
    assert again == first
    assert count_jobs(database_url) == 1


async def test_unique_by_args(aclient: wai.AsyncClient, database_url: str) -> None:
    a = await aclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    b = await aclient.insert(SendEmail(to="b"), unique=wai.UniqueOpts())
    assert a.id != b.id
    # Unique by kind alone: the first insert holds the key, the second conflicts.
    only_kind = wai.UniqueOpts(by_args=False)
    c = await aclient.insert(SendEmail(to="c"), unique=only_kind)
    with pytest.raises(wai.UniqueConflict) as info:
        await aclient.insert(SendEmail(to="d"), unique=only_kind)
    assert info.value.existing_id == c.id
    assert count_jobs(database_url) == 3


async def test_unique_by_queue(aclient: wai.AsyncClient, database_url: str) -> None:
    per_queue = wai.UniqueOpts(by_queue=True)
    q1 = await aclient.insert(SendEmail(to="a"), queue="q1", unique=per_queue)
    q2 = await aclient.insert(SendEmail(to="a"), queue="q2", unique=per_queue)
    assert q1.id != q2.id
    with pytest.raises(wai.UniqueConflict) as info:
        await aclient.insert(SendEmail(to="a"), queue="q1", unique=per_queue)
    assert info.value.existing_id == q1.id
    # Without by_queue the queue is not part of the key.
    z = await aclient.insert(SendEmail(to="z"), queue="q1", unique=wai.UniqueOpts())
    with pytest.raises(wai.UniqueConflict) as info:
        await aclient.insert(SendEmail(to="z"), queue="q2", unique=wai.UniqueOpts())
    assert info.value.existing_id == z.id
    assert count_jobs(database_url) == 3


async def test_unique_by_period(aclient: wai.AsyncClient, database_url: str) -> None:
    daily = wai.UniqueOpts(by_period=86_400)
    first = await aclient.insert(SendEmail(to="a"), unique=daily)
    with pytest.raises(wai.UniqueConflict) as info:
        await aclient.insert(SendEmail(to="a"), unique=daily)
    assert info.value.existing_id == first.id
    # The period is part of the key: a plain unique insert of the same args is another key.
    plain = await aclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    assert plain.unique_key != first.unique_key
    # Pretend the first job was inserted yesterday: today's bucket is free again.
    yesterday = unique_key(
        daily,
        kind="send_email",
        queue="default",
        args_json='{"to":"a","subject":"hello"}',
        now=datetime.now(UTC) - timedelta(days=1),
    )
    execute(
        database_url, "UPDATE wai.jobs SET unique_key = %s WHERE id = %s", (yesterday, first.id)
    )
    today = await aclient.insert(SendEmail(to="a"), unique=daily)
    assert today.id not in (first.id, plain.id)
    assert count_jobs(database_url) == 3


async def test_unique_states_without_completed_let_a_new_job_in(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    live = wai.UniqueOpts(states=["scheduled", "available", "running", "retryable"])
    first = await aclient.insert(SendEmail(to="a"), unique=live)
    with pytest.raises(wai.UniqueConflict):
        await aclient.insert(SendEmail(to="a"), unique=live)
    set_state(database_url, first.id, "completed")
    second = await aclient.insert(SendEmail(to="a"), unique=live)
    assert second.id != first.id
    assert second.state == "available"
    assert count_jobs(database_url) == 2


async def test_unique_default_states_hold_completed_release_failed(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    first = await aclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    set_state(database_url, first.id, "completed")
    with pytest.raises(wai.UniqueConflict) as info:
        await aclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    assert info.value.existing_id == first.id
    set_state(database_url, first.id, "failed")
    second = await aclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    assert second.id != first.id
    assert count_jobs(database_url) == 2


# -- insert_many -----------------------------------------------------------------------


async def test_insert_many_ten_thousand_in_input_order(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    rows = await aclient.insert_many(Counter(n=i) for i in range(10_000))
    assert [r.args["n"] for r in rows] == list(range(10_000))
    assert ids(rows) == sorted(ids(rows))
    assert len(set(ids(rows))) == 10_000
    assert {(r.kind, r.queue, r.state) for r in rows} == {("counter", "default", "available")}
    assert count_jobs(database_url) == 10_000


async def test_insert_many_empty(aclient: wai.AsyncClient, database_url: str) -> None:
    assert await aclient.insert_many([]) == []
    assert count_jobs(database_url) == 0


async def test_insert_many_mixed_requests(aclient: wai.AsyncClient) -> None:
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)
    rows = await aclient.insert_many(
        [
            SendEmail(to="plain"),
            wai.EnqueueRequest(
                Counter(n=1), queue="counting", priority=1, tags=["t"], metadata={"m": 1}
            ),
            wai.EnqueueRequest(
                {"raw": True}, kind="raw_dict", run_at=when, max_attempts=2, ordering_key="k"
            ),
            HTMLToPDF(url="u"),
        ]
    )
    assert [r.kind for r in rows] == ["send_email", "counter", "raw_dict", "html_to_pdf"]
    assert [r.state for r in rows] == ["available", "available", "scheduled", "available"]
    assert [r.queue for r in rows] == ["default", "counting", "default", "default"]
    assert [r.priority for r in rows] == [2, 1, 2, 2]
    assert [r.max_attempts for r in rows] == [25, 25, 2, 25]
    assert rows[1].tags == ("t",)
    assert rows[1].metadata == {"m": 1}
    assert rows[2].run_at == when
    assert rows[2].ordering_key == "k"
    assert rows[2].args == {"raw": True}
    assert [await aclient.get_job(r.id) for r in rows] == rows


async def test_insert_many_sets_every_column_of_every_row(aclient: wai.AsyncClient) -> None:
    when = datetime(2031, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    skip = wai.UniqueOpts(on_conflict="skip", by_queue=True)
    rows = await aclient.insert_many(
        [
            wai.EnqueueRequest(
                {"q": HOSTILE, "n": i, "u": "ü\U0001f680", "big": 2**70, "f": 0.1, "z": "\\u0000"},
                kind="hostile_data",
                queue=f"q{i}",
                priority=1 + i % 4,
                max_attempts=3 + i,
                run_at=when,
                tags=[HOSTILE, f"t{i}", "$$;--", "ü"],
                metadata={HOSTILE: i, "nested": {"a": [1, None]}},
                unique=skip,
                ordering_key=f"{HOSTILE}:{i}",
            )
            for i in range(3)
        ]
    )
    assert [r.args["n"] for r in rows] == [0, 1, 2]
    assert [r.queue for r in rows] == ["q0", "q1", "q2"]
    assert [r.priority for r in rows] == [1, 2, 3]
    assert [r.max_attempts for r in rows] == [3, 4, 5]
    assert {r.state for r in rows} == {"scheduled"}
    assert {r.run_at for r in rows} == {when}
    assert rows[1].tags == (HOSTILE, "t1", "$$;--", "ü")
    assert rows[2].metadata == {HOSTILE: 2, "nested": {"a": [1, None]}}
    assert rows[0].ordering_key == f"{HOSTILE}:0"
    assert rows[0].args["big"] == 2**70
    assert rows[0].args["z"] == "\\u0000"
    assert all(r.unique_key is not None for r in rows)
    assert [await aclient.get_job(r.id) for r in rows] == rows
    again = await aclient.insert_many(
        [
            wai.EnqueueRequest(Counter(n=9)),
            wai.EnqueueRequest(rows[1].args, kind="hostile_data", queue="q1", unique=skip),
        ]
    )
    assert again[1] == rows[1]


async def test_insert_many_unique_rows_inside_a_batch(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    held = await aclient.insert(SendEmail(to="held"), unique=wai.UniqueOpts())
    skip = wai.UniqueOpts(on_conflict="skip")
    rows = await aclient.insert_many(
        [
            wai.EnqueueRequest(SendEmail(to="new"), unique=skip),
            Counter(n=1),
            wai.EnqueueRequest(SendEmail(to="held"), unique=skip),
            wai.EnqueueRequest(SendEmail(to="new"), unique=skip),  # duplicate within the batch
            Counter(n=2),
        ]
    )
    assert rows[0].args["to"] == "new"
    assert rows[1].args == {"n": 1}
    assert rows[2] == held
    assert rows[3].id == rows[0].id
    assert rows[4].args == {"n": 2}
    assert count_jobs(database_url) == 4  # held, new, and two counters
    assert [await aclient.get_job(r.id) for r in rows] == rows  # built rows = stored rows


async def test_insert_many_conflict_inserts_nothing(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    held = await aclient.insert(SendEmail(to="held"), unique=wai.UniqueOpts())
    with pytest.raises(wai.UniqueConflict) as info:
        await aclient.insert_many(
            [
                Counter(n=1),
                wai.EnqueueRequest(SendEmail(to="held"), unique=wai.UniqueOpts()),
                Counter(n=2),
            ]
        )
    assert info.value.existing_id == held.id
    assert count_jobs(database_url) == 1


async def test_insert_many_duplicate_within_batch_raises_and_inserts_nothing(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    dup = wai.EnqueueRequest(SendEmail(to="dup"), unique=wai.UniqueOpts())
    with pytest.raises(wai.UniqueConflict):
        await aclient.insert_many([Counter(n=0), dup, dup])
    assert count_jobs(database_url) == 0


async def test_insert_many_invalid_item_inserts_nothing(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    with pytest.raises(wai.ValidationError, match="priority"):
        await aclient.insert_many(
            [Counter(n=1), wai.EnqueueRequest(Counter(n=2), priority=9), Counter(n=3)]
        )
    assert count_jobs(database_url) == 0


# -- transaction() ---------------------------------------------------------------------


async def test_transaction_commits_business_row_and_job_together(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    execute(database_url, "CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL)")
    async with aclient.transaction() as tx:
        await tx.execute("INSERT INTO orders (id, total) VALUES (%s, %s)", (1, 990))
        job = await tx.insert(SendEmail(to="buyer"), queue="receipts")
        [extra] = await tx.insert_many([Counter(n=1)])
        cur = await tx.execute("SELECT count(*) FROM wai.jobs")
        assert await cur.fetchone() == (2,)
        # Nothing is visible to other sessions before the commit.
        assert count_jobs(database_url) == 0
        assert count_rows(database_url, "orders") == 0
    assert count_rows(database_url, "orders") == 1
    assert (await aclient.get_job(job.id)).queue == "receipts"
    assert (await aclient.get_job(extra.id)).args == {"n": 1}


async def test_transaction_rolls_back_on_exception(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    execute(database_url, "CREATE TABLE orders (id int PRIMARY KEY)")
    inserted: list[wai.JobRow] = []

    async def place_order() -> None:
        async with aclient.transaction() as tx:
            await tx.execute("INSERT INTO orders (id) VALUES (%s)", (1,))
            inserted.append(await tx.insert(SendEmail(to="buyer")))
            inserted.extend(await tx.insert_many([Counter(n=1), Counter(n=2)]))
            raise Boom

    with pytest.raises(Boom):
        await place_order()
    assert len(inserted) == 3
    assert count_rows(database_url, "orders") == 0
    assert count_jobs(database_url) == 0
    with pytest.raises(wai.JobNotFound):
        await aclient.get_job(inserted[0].id)
    # The pooled connection is clean afterwards.
    assert (await aclient.insert(SendEmail(to="next"))).state == "available"


async def test_transaction_failed_statement_rolls_back_the_job(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    execute(database_url, "CREATE TABLE orders (id int PRIMARY KEY)")

    async def place_order() -> None:
        async with aclient.transaction() as tx:
            await tx.insert(SendEmail(to="buyer"))
            await tx.execute("INSERT INTO orders (id) VALUES (1), (1)")

    with pytest.raises(psycopg.errors.UniqueViolation):
        await place_order()
    assert count_jobs(database_url) == 0


async def test_transaction_survives_a_caught_unique_conflict(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    held = await aclient.insert(SendEmail(to="held"), unique=wai.UniqueOpts())
    execute(database_url, "CREATE TABLE orders (id int PRIMARY KEY)")
    async with aclient.transaction() as tx:
        await tx.execute("INSERT INTO orders (id) VALUES (1)")
        with pytest.raises(wai.UniqueConflict) as info:
            await tx.insert(SendEmail(to="held"), unique=wai.UniqueOpts())
        assert info.value.existing_id == held.id
        await tx.insert(SendEmail(to="fresh"))
    assert count_rows(database_url, "orders") == 1
    assert count_jobs(database_url) == 2


# -- wai.bridge ------------------------------------------------------------------------


async def test_bridge_rollback_leaves_no_job(database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        row = await wai.bridge.insert_job(conn, SendEmail(to="x"), queue="bridge")
        assert row.queue == "bridge"
        cur = await conn.execute("SELECT count(*) FROM wai.jobs")
        assert await cur.fetchone() == (1,)  # visible inside the caller's transaction
        assert count_jobs(database_url) == 0  # and nowhere else
        await conn.rollback()
    assert count_jobs(database_url) == 0


async def test_bridge_commit_makes_the_job_visible(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    execute(database_url, "CREATE TABLE orders (id int PRIMARY KEY)")
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        async with conn.transaction():
            await conn.execute("INSERT INTO orders (id) VALUES (1)")
            row = await wai.bridge.insert_job(
                conn,
                SendEmail(to="x"),
                priority=3,
                tags=["bridge"],
                metadata={"via": "bridge"},
                unique=wai.UniqueOpts(),
            )
            assert count_jobs(database_url) == 0
        assert count_jobs(database_url) == 1
    assert await aclient.get_job(row.id) == row
    assert (row.priority, row.tags, row.metadata) == (3, ("bridge",), {"via": "bridge"})
    assert count_rows(database_url, "orders") == 1


async def test_bridge_on_a_dict_row_connection(database_url: str) -> None:
    async with await psycopg.AsyncConnection[DictRow].connect(
        database_url, autocommit=True, row_factory=dict_row
    ) as conn:
        row = await wai.bridge.insert_job(conn, SendEmail(to="x"), unique=wai.UniqueOpts())
        again = await wai.bridge.insert_job(
            conn, SendEmail(to="x"), unique=wai.UniqueOpts(on_conflict="skip")
        )
    assert again.id == row.id
    assert count_jobs(database_url) == 1


async def test_bridge_custom_schema_is_validated(database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        with pytest.raises(wai.ValidationError, match="invalid schema name"):
            await wai.bridge.insert_job(conn, SendEmail(to="x"), schema="wai; drop")
        with pytest.raises(wai.SchemaNotMigrated, match="nowhere"):
            await wai.bridge.insert_job(conn, SendEmail(to="x"), schema="nowhere")
    assert count_jobs(database_url) == 0


# -- NOTIFY ----------------------------------------------------------------------------


async def notifications(conn: psycopg.AsyncConnection[Any], n: int) -> list[tuple[str, str]]:
    """The next ``n`` notifications (fewer if they do not come within 10 s)."""
    return [(m.channel, m.payload) async for m in conn.notifies(timeout=10, stop_after=n)]


async def test_notify_on_commit_with_the_queue_as_payload(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as listener:
        await listener.execute('LISTEN "wai.jobs"')
        async with aclient.transaction() as tx:
            await tx.insert(SendEmail(to="x"), queue="mail")
            # Committed on another connection while the transaction is still open.
            await aclient.insert(SendEmail(to="marker"), queue="marker-1")
        await aclient.insert(SendEmail(to="marker"), queue="marker-2")
        got = await notifications(listener, 3)
    # "mail" arrives after marker-1: it was sent at commit, not at insert.
    assert got == [("wai.jobs", "marker-1"), ("wai.jobs", "mail"), ("wai.jobs", "marker-2")]


async def test_notify_nothing_after_rollback(aclient: wai.AsyncClient, database_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as listener:
        await listener.execute('LISTEN "wai.jobs"')
        with pytest.raises(Boom):
            await insert_then_fail(aclient, SendEmail(to="x"), queue="rolled-back")
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            await wai.bridge.insert_job(conn, SendEmail(to="x"), queue="bridge-rolled-back")
            await conn.rollback()
        # Scheduled jobs are not claimable yet: no wakeup either.
        await aclient.insert(SendEmail(to="later"), queue="scheduled", run_at=datetime.now(UTC))
        await aclient.insert(SendEmail(to="marker"), queue="marker")
        got = await notifications(listener, 1)
    assert got == [("wai.jobs", "marker")]


async def test_notify_bridge_commit_and_insert_many(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as listener:
        await listener.execute('LISTEN "wai.jobs"')
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            await wai.bridge.insert_job(conn, SendEmail(to="x"), queue="bridged")
            await conn.commit()
        await aclient.insert_many(
            [
                wai.EnqueueRequest(Counter(n=1), queue="a"),
                wai.EnqueueRequest(Counter(n=2), queue="b"),
                wai.EnqueueRequest(Counter(n=3), queue="a"),
            ]
        )
        await aclient.insert(SendEmail(to="marker"), queue="marker")
        got = await notifications(listener, 4)
    assert got[0] == ("wai.jobs", "bridged")
    assert sorted(got[1:3]) == [("wai.jobs", "a"), ("wai.jobs", "b")]  # one per queue
    assert got[3] == ("wai.jobs", "marker")


async def test_notify_insert_many_only_for_available_jobs(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as listener:
        await listener.execute('LISTEN "wai.jobs"')
        later = datetime.now(UTC) + timedelta(hours=1)
        await aclient.insert_many(
            [wai.EnqueueRequest(Counter(n=i), queue="later", run_at=later) for i in range(3)]
        )
        await aclient.insert_many(
            [
                wai.EnqueueRequest(Counter(n=1), queue="later", run_at=later),
                wai.EnqueueRequest(Counter(n=2), queue="now"),
                wai.EnqueueRequest(Counter(n=3), queue="now"),
            ]
        )
        await aclient.insert(SendEmail(to="marker"), queue="marker")
        got = await notifications(listener, 2)
    assert got == [("wai.jobs", "now"), ("wai.jobs", "marker")]


# -- get_job / list_jobs ---------------------------------------------------------------


async def test_get_job_not_found(shared_database_url: str) -> None:
    async with wai.AsyncClient(shared_database_url, max_connections=2) as client:
        with pytest.raises(wai.JobNotFound, match="999999"):
            await client.get_job(999_999)
    assert issubclass(wai.JobNotFound, LookupError)


async def test_list_jobs_filters(aclient: wai.AsyncClient, database_url: str) -> None:
    a = await aclient.insert(SendEmail(to="a"), queue="mail", tags=["vip", "eu"])
    b = await aclient.insert(HTMLToPDF(url="u"), queue="pdf", tags=["eu"])
    c = await aclient.insert(SendEmail(to="c"), queue="mail")
    d = await aclient.insert(Counter(n=1), run_at=datetime.now(UTC) + timedelta(hours=1))
    set_state(database_url, c.id, "completed")

    assert ids(await aclient.list_jobs()) == [d.id, c.id, b.id, a.id]
    assert ids(await aclient.list_jobs(state="completed")) == [c.id]
    assert ids(await aclient.list_jobs(state=wai.JobState.SCHEDULED)) == [d.id]
    assert ids(await aclient.list_jobs(state="available")) == [b.id, a.id]
    assert ids(await aclient.list_jobs(kind="send_email")) == [c.id, a.id]
    assert ids(await aclient.list_jobs(queue="pdf")) == [b.id]
    assert ids(await aclient.list_jobs(tag="eu")) == [b.id, a.id]
    assert ids(await aclient.list_jobs(tag="vip")) == [a.id]
    assert ids(await aclient.list_jobs(kind="send_email", state="available", tag="eu")) == [a.id]
    assert await aclient.list_jobs(kind=HOSTILE) == []
    assert await aclient.list_jobs(queue=HOSTILE, tag=HOSTILE) == []
    assert ids(await aclient.list_jobs(limit=2)) == [d.id, c.id]
    [completed] = await aclient.list_jobs(state="completed")
    assert completed.state == "completed"
    assert completed.finalized_at is not None


async def test_list_jobs_pages_with_before_id(aclient: wai.AsyncClient) -> None:
    await aclient.insert_many(Counter(n=i) for i in range(7))
    pages: list[list[int]] = []
    before: int | None = None
    while page := await aclient.list_jobs(limit=3, before_id=before):
        pages.append([r.args["n"] for r in page])
        before = page[-1].id
    assert pages == [[6, 5, 4], [3, 2, 1], [0]]


@pytest.mark.parametrize(
    "options",
    [{"state": "done"}, {"state": HOSTILE}, {"limit": 0}, {"limit": 10_001}, {"limit": True}],
)
async def test_list_jobs_rejects_bad_filters(
    shared_database_url: str, options: dict[str, Any]
) -> None:
    async with wai.AsyncClient(shared_database_url, max_connections=2) as client:
        with pytest.raises(wai.ValidationError):
            await client.list_jobs(**options)


# -- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "options", "error"), bad_inserts())
async def test_bad_input_is_rejected_and_writes_nothing(
    shared_database_url: str, args: Any, options: dict[str, Any], error: type[Exception]
) -> None:
    url = shared_database_url
    async with wai.AsyncClient(url, max_connections=2) as client:
        with pytest.raises(error):
            await client.insert(args, **options)
        with pytest.raises(error):
            await client.insert_many([Counter(n=1), wai.EnqueueRequest(args, **options)])
        with pytest.raises(error):
            await insert_in_transaction(client, [Counter(n=2), args], options)
    async with await psycopg.AsyncConnection.connect(url) as conn:
        with pytest.raises(error):
            await wai.bridge.insert_job(conn, args, **options)
    assert count_jobs(url) == 0
