"""Inserts through wai.Client, its transactions and wai.bridge.insert_job_sync.

tests/integration/test_insert_async.py is the parallel file for wai.AsyncClient; keep
them in step.
"""

from __future__ import annotations

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
class RoutedSync:
    """Registered on queue "routed_sync" by a test; used nowhere else."""

    n: int


class Boom(Exception):
    """Raised inside transactions to force a rollback."""


def ids(rows: list[wai.JobRow]) -> list[int]:
    return [r.id for r in rows]


def insert_then_fail(client: wai.Client, args: Any, **options: Any) -> None:
    """Insert in a transaction, then raise Boom so that it rolls back."""
    with client.transaction() as tx:
        tx.insert(args, **options)
        raise Boom


def insert_in_transaction(
    client: wai.Client, items: list[Any], last_options: dict[str, Any]
) -> None:
    """Insert ``items`` in one transaction; the last one with ``last_options``."""
    with client.transaction() as tx:
        for item in items[:-1]:
            tx.insert(item)
        tx.insert(items[-1], **last_options)


# -- insert ----------------------------------------------------------------------------


def test_insert_defaults(sclient: wai.Client, database_url: str) -> None:
    row = sclient.insert(SendEmail(to="a@example.com"))
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
    assert sclient.get_job(row.id) == row
    assert count_jobs(database_url) == 1


def test_insert_every_option(sclient: wai.Client, database_url: str) -> None:
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    row = sclient.insert(
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
    assert sclient.get_job(row.id) == row
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


def test_insert_past_run_at_is_still_scheduled(sclient: wai.Client) -> None:
    when = datetime.now(UTC) - timedelta(days=1)
    row = sclient.insert(SendEmail(to="late"), run_at=when)
    assert row.state == "scheduled"
    assert row.run_at == when


def test_insert_args_types(sclient: wai.Client) -> None:
    card = sclient.insert(ChargeCard(card_id="c_1", cents=990))
    image = sclient.insert(ResizeImage(path="/img.png", width=64))
    pdf = sclient.insert(HTMLToPDF(url="https://example.com"))
    assert (card.kind, card.args) == ("charge_card", {"card_id": "c_1", "cents": 990})
    assert (image.kind, image.args) == ("resize_image", {"path": "/img.png", "width": 64})
    assert (pdf.kind, pdf.args) == ("html_to_pdf", {"url": "https://example.com"})


def test_insert_stores_hostile_strings_verbatim(sclient: wai.Client, database_url: str) -> None:
    row = sclient.insert(
        {"q": HOSTILE, "quote": "'\"\\", "unicode": "ü\U0001f680"},
        kind="hostile_data",
        tags=[HOSTILE, "$$;--"],
        metadata={HOSTILE: HOSTILE},
        ordering_key=HOSTILE,
    )
    stored = sclient.get_job(row.id)
    assert stored.args == {"q": HOSTILE, "quote": "'\"\\", "unicode": "ü\U0001f680"}
    assert stored.tags == (HOSTILE, "$$;--")
    assert stored.metadata == {HOSTILE: HOSTILE}
    assert stored.ordering_key == HOSTILE
    assert [r.id for r in sclient.list_jobs(tag=HOSTILE)] == [row.id]
    assert count_jobs(database_url) == 1  # the table is still there


def test_insert_literal_backslash_u0000_is_stored(sclient: wai.Client) -> None:
    row = sclient.insert({"s": "\\u0000"}, kind="escaped")
    assert sclient.get_job(row.id).args == {"s": "\\u0000"}


def test_insert_default_queue_is_the_registered_queue(
    sclient: wai.Client, database_url: str
) -> None:
    @sclient.task(RoutedSync, queue="routed_sync", max_attempts=5)
    def handle(job: wai.Job[RoutedSync]) -> None:  # registration only, never run
        raise AssertionError(job)

    row = sclient.insert(RoutedSync(n=1))
    assert (row.queue, row.max_attempts) == ("routed_sync", 5)
    explicit = sclient.insert(RoutedSync(n=2), queue="elsewhere", max_attempts=2)
    assert (explicit.queue, explicit.max_attempts) == ("elsewhere", 2)
    [many] = sclient.insert_many([RoutedSync(n=3)])
    assert many.queue == "routed_sync"
    with sclient.transaction() as tx:
        assert tx.insert(RoutedSync(n=4)).queue == "routed_sync"
    with psycopg.connect(database_url) as conn:
        assert wai.bridge.insert_job_sync(conn, RoutedSync(n=5)).queue == "routed_sync"
    assert count_jobs(database_url, "queue = 'routed_sync'") == 4


def test_insert_default_queue_of_a_kind_registered_by_name(
    sclient: wai.Client,
) -> None:
    @sclient.task("report_sync", queue="reports_sync")
    def handle(job: wai.Job[dict[str, Any]]) -> None:
        raise AssertionError(job)

    row = sclient.insert({"month": 5}, kind="report_sync")
    assert (row.kind, row.queue) == ("report_sync", "reports_sync")


# -- unique ----------------------------------------------------------------------------


def test_unique_duplicate_raises_with_existing_id(sclient: wai.Client, database_url: str) -> None:
    first = sclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    assert first.unique_key is not None
    assert len(first.unique_key) == 16
    with pytest.raises(wai.UniqueConflict) as info:
        sclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    assert info.value.existing_id == first.id
    assert f"job {first.id}" in str(info.value)
    assert "on_conflict='skip'" in str(info.value)
    assert count_jobs(database_url) == 1


def test_unique_skip_returns_the_existing_job(sclient: wai.Client, database_url: str) -> None:
    first = sclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    again = sclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts(on_conflict="skip"))
    assert again == first
    assert count_jobs(database_url) == 1


def test_unique_by_args(sclient: wai.Client, database_url: str) -> None:
    a = sclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    b = sclient.insert(SendEmail(to="b"), unique=wai.UniqueOpts())
    assert a.id != b.id
    # Unique by kind alone: the first insert holds the key, the second conflicts.
    only_kind = wai.UniqueOpts(by_args=False)
    c = sclient.insert(SendEmail(to="c"), unique=only_kind)
    with pytest.raises(wai.UniqueConflict) as info:
        sclient.insert(SendEmail(to="d"), unique=only_kind)
    assert info.value.existing_id == c.id
    assert count_jobs(database_url) == 3


def test_unique_by_queue(sclient: wai.Client, database_url: str) -> None:
    per_queue = wai.UniqueOpts(by_queue=True)
    q1 = sclient.insert(SendEmail(to="a"), queue="q1", unique=per_queue)
    q2 = sclient.insert(SendEmail(to="a"), queue="q2", unique=per_queue)
    assert q1.id != q2.id
    with pytest.raises(wai.UniqueConflict) as info:
        sclient.insert(SendEmail(to="a"), queue="q1", unique=per_queue)
    assert info.value.existing_id == q1.id
    # Without by_queue the queue is not part of the key.
    z = sclient.insert(SendEmail(to="z"), queue="q1", unique=wai.UniqueOpts())
    with pytest.raises(wai.UniqueConflict) as info:
        sclient.insert(SendEmail(to="z"), queue="q2", unique=wai.UniqueOpts())
    assert info.value.existing_id == z.id
    assert count_jobs(database_url) == 3


def test_unique_by_period(sclient: wai.Client, database_url: str) -> None:
    daily = wai.UniqueOpts(by_period=86_400)
    first = sclient.insert(SendEmail(to="a"), unique=daily)
    with pytest.raises(wai.UniqueConflict) as info:
        sclient.insert(SendEmail(to="a"), unique=daily)
    assert info.value.existing_id == first.id
    # The period is part of the key: a plain unique insert of the same args is another key.
    plain = sclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
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
    today = sclient.insert(SendEmail(to="a"), unique=daily)
    assert today.id not in (first.id, plain.id)
    assert count_jobs(database_url) == 3


def test_unique_states_without_completed_let_a_new_job_in(
    sclient: wai.Client, database_url: str
) -> None:
    live = wai.UniqueOpts(states=["scheduled", "available", "running", "retryable"])
    first = sclient.insert(SendEmail(to="a"), unique=live)
    with pytest.raises(wai.UniqueConflict):
        sclient.insert(SendEmail(to="a"), unique=live)
    set_state(database_url, first.id, "completed")
    second = sclient.insert(SendEmail(to="a"), unique=live)
    assert second.id != first.id
    assert second.state == "available"
    assert count_jobs(database_url) == 2


def test_unique_default_states_hold_completed_release_failed(
    sclient: wai.Client, database_url: str
) -> None:
    first = sclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    set_state(database_url, first.id, "completed")
    with pytest.raises(wai.UniqueConflict) as info:
        sclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    assert info.value.existing_id == first.id
    set_state(database_url, first.id, "failed")
    second = sclient.insert(SendEmail(to="a"), unique=wai.UniqueOpts())
    assert second.id != first.id
    assert count_jobs(database_url) == 2


# -- insert_many -----------------------------------------------------------------------


def test_insert_many_ten_thousand_in_input_order(sclient: wai.Client, database_url: str) -> None:
    rows = sclient.insert_many(Counter(n=i) for i in range(10_000))
    assert [r.args["n"] for r in rows] == list(range(10_000))
    assert ids(rows) == sorted(ids(rows))
    assert len(set(ids(rows))) == 10_000
    assert {(r.kind, r.queue, r.state) for r in rows} == {("counter", "default", "available")}
    assert count_jobs(database_url) == 10_000


def test_insert_many_empty(sclient: wai.Client, database_url: str) -> None:
    assert sclient.insert_many([]) == []
    assert count_jobs(database_url) == 0


def test_insert_many_mixed_requests(sclient: wai.Client) -> None:
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)
    rows = sclient.insert_many(
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
    assert [sclient.get_job(r.id) for r in rows] == rows


def test_insert_many_sets_every_column_of_every_row(sclient: wai.Client) -> None:
    when = datetime(2031, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    skip = wai.UniqueOpts(on_conflict="skip", by_queue=True)
    rows = sclient.insert_many(
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
    assert [sclient.get_job(r.id) for r in rows] == rows
    again = sclient.insert_many(
        [
            wai.EnqueueRequest(Counter(n=9)),
            wai.EnqueueRequest(rows[1].args, kind="hostile_data", queue="q1", unique=skip),
        ]
    )
    assert again[1] == rows[1]


def test_insert_many_unique_rows_inside_a_batch(sclient: wai.Client, database_url: str) -> None:
    held = sclient.insert(SendEmail(to="held"), unique=wai.UniqueOpts())
    skip = wai.UniqueOpts(on_conflict="skip")
    rows = sclient.insert_many(
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


def test_insert_many_conflict_inserts_nothing(sclient: wai.Client, database_url: str) -> None:
    held = sclient.insert(SendEmail(to="held"), unique=wai.UniqueOpts())
    with pytest.raises(wai.UniqueConflict) as info:
        sclient.insert_many(
            [
                Counter(n=1),
                wai.EnqueueRequest(SendEmail(to="held"), unique=wai.UniqueOpts()),
                Counter(n=2),
            ]
        )
    assert info.value.existing_id == held.id
    assert count_jobs(database_url) == 1


def test_insert_many_duplicate_within_batch_raises_and_inserts_nothing(
    sclient: wai.Client, database_url: str
) -> None:
    dup = wai.EnqueueRequest(SendEmail(to="dup"), unique=wai.UniqueOpts())
    with pytest.raises(wai.UniqueConflict):
        sclient.insert_many([Counter(n=0), dup, dup])
    assert count_jobs(database_url) == 0


def test_insert_many_invalid_item_inserts_nothing(sclient: wai.Client, database_url: str) -> None:
    with pytest.raises(wai.ValidationError, match="priority"):
        sclient.insert_many(
            [Counter(n=1), wai.EnqueueRequest(Counter(n=2), priority=9), Counter(n=3)]
        )
    assert count_jobs(database_url) == 0


# -- transaction() ---------------------------------------------------------------------


def test_transaction_commits_business_row_and_job_together(
    sclient: wai.Client, database_url: str
) -> None:
    execute(database_url, "CREATE TABLE orders (id int PRIMARY KEY, total int NOT NULL)")
    with sclient.transaction() as tx:
        tx.execute("INSERT INTO orders (id, total) VALUES (%s, %s)", (1, 990))
        job = tx.insert(SendEmail(to="buyer"), queue="receipts")
        [extra] = tx.insert_many([Counter(n=1)])
        cur = tx.execute("SELECT count(*) FROM wai.jobs")
        assert cur.fetchone() == (2,)
        # Nothing is visible to other sessions before the commit.
        assert count_jobs(database_url) == 0
        assert count_rows(database_url, "orders") == 0
    assert count_rows(database_url, "orders") == 1
    assert sclient.get_job(job.id).queue == "receipts"
    assert sclient.get_job(extra.id).args == {"n": 1}


def test_transaction_rolls_back_on_exception(sclient: wai.Client, database_url: str) -> None:
    execute(database_url, "CREATE TABLE orders (id int PRIMARY KEY)")
    inserted: list[wai.JobRow] = []

    def place_order() -> None:
        with sclient.transaction() as tx:
            tx.execute("INSERT INTO orders (id) VALUES (%s)", (1,))
            inserted.append(tx.insert(SendEmail(to="buyer")))
            inserted.extend(tx.insert_many([Counter(n=1), Counter(n=2)]))
            raise Boom

    with pytest.raises(Boom):
        place_order()
    assert len(inserted) == 3
    assert count_rows(database_url, "orders") == 0
    assert count_jobs(database_url) == 0
    with pytest.raises(wai.JobNotFound):
        sclient.get_job(inserted[0].id)
    # The pooled connection is clean afterwards.
    assert sclient.insert(SendEmail(to="next")).state == "available"


def test_transaction_failed_statement_rolls_back_the_job(
    sclient: wai.Client, database_url: str
) -> None:
    execute(database_url, "CREATE TABLE orders (id int PRIMARY KEY)")

    def place_order() -> None:
        with sclient.transaction() as tx:
            tx.insert(SendEmail(to="buyer"))
            tx.execute("INSERT INTO orders (id) VALUES (1), (1)")

    with pytest.raises(psycopg.errors.UniqueViolation):
        place_order()
    assert count_jobs(database_url) == 0


def test_transaction_survives_a_caught_unique_conflict(
    sclient: wai.Client, database_url: str
) -> None:
    held = sclient.insert(SendEmail(to="held"), unique=wai.UniqueOpts())
    execute(database_url, "CREATE TABLE orders (id int PRIMARY KEY)")
    with sclient.transaction() as tx:
        tx.execute("INSERT INTO orders (id) VALUES (1)")
        with pytest.raises(wai.UniqueConflict) as info:
            tx.insert(SendEmail(to="held"), unique=wai.UniqueOpts())
        assert info.value.existing_id == held.id
        tx.insert(SendEmail(to="fresh"))
    assert count_rows(database_url, "orders") == 1
    assert count_jobs(database_url) == 2


# -- wai.bridge ------------------------------------------------------------------------


def test_bridge_rollback_leaves_no_job(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        row = wai.bridge.insert_job_sync(conn, SendEmail(to="x"), queue="bridge")
        assert row.queue == "bridge"
        cur = conn.execute("SELECT count(*) FROM wai.jobs")
        assert cur.fetchone() == (1,)  # visible inside the caller's transaction
        assert count_jobs(database_url) == 0  # and nowhere else
        conn.rollback()
    assert count_jobs(database_url) == 0


def test_bridge_commit_makes_the_job_visible(sclient: wai.Client, database_url: str) -> None:
    execute(database_url, "CREATE TABLE orders (id int PRIMARY KEY)")
    with psycopg.connect(database_url) as conn:
        with conn.transaction():
            conn.execute("INSERT INTO orders (id) VALUES (1)")
            row = wai.bridge.insert_job_sync(
                conn,
                SendEmail(to="x"),
                priority=3,
                tags=["bridge"],
                metadata={"via": "bridge"},
                unique=wai.UniqueOpts(),
            )
            assert count_jobs(database_url) == 0
        assert count_jobs(database_url) == 1
    assert sclient.get_job(row.id) == row
    assert (row.priority, row.tags, row.metadata) == (3, ("bridge",), {"via": "bridge"})
    assert count_rows(database_url, "orders") == 1


def test_bridge_on_a_dict_row_connection(database_url: str) -> None:
    with psycopg.Connection[DictRow].connect(
        database_url, autocommit=True, row_factory=dict_row
    ) as conn:
        row = wai.bridge.insert_job_sync(conn, SendEmail(to="x"), unique=wai.UniqueOpts())
        again = wai.bridge.insert_job_sync(
            conn, SendEmail(to="x"), unique=wai.UniqueOpts(on_conflict="skip")
        )
    assert again.id == row.id
    assert count_jobs(database_url) == 1


def test_bridge_custom_schema_is_validated(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        with pytest.raises(wai.ValidationError, match="invalid schema name"):
            wai.bridge.insert_job_sync(conn, SendEmail(to="x"), schema="wai; drop")
        with pytest.raises(wai.SchemaNotMigrated, match="nowhere"):
            wai.bridge.insert_job_sync(conn, SendEmail(to="x"), schema="nowhere")
    assert count_jobs(database_url) == 0


# -- NOTIFY ----------------------------------------------------------------------------


def notifications(conn: psycopg.Connection[Any], n: int) -> list[tuple[str, str]]:
    """The next ``n`` notifications (fewer if they do not come within 10 s)."""
    return [(m.channel, m.payload) for m in conn.notifies(timeout=10, stop_after=n)]


def test_notify_on_commit_with_the_queue_as_payload(sclient: wai.Client, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute('LISTEN "wai.jobs"')
        with sclient.transaction() as tx:
            tx.insert(SendEmail(to="x"), queue="mail")
            # Committed on another connection while the transaction is still open.
            sclient.insert(SendEmail(to="marker"), queue="marker-1")
        sclient.insert(SendEmail(to="marker"), queue="marker-2")
        got = notifications(listener, 3)
    # "mail" arrives after marker-1: it was sent at commit, not at insert.
    assert got == [("wai.jobs", "marker-1"), ("wai.jobs", "mail"), ("wai.jobs", "marker-2")]


def test_notify_nothing_after_rollback(sclient: wai.Client, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute('LISTEN "wai.jobs"')
        with pytest.raises(Boom):
            insert_then_fail(sclient, SendEmail(to="x"), queue="rolled-back")
        with psycopg.connect(database_url) as conn:
            wai.bridge.insert_job_sync(conn, SendEmail(to="x"), queue="bridge-rolled-back")
            conn.rollback()
        # Scheduled jobs are not claimable yet: no wakeup either.
        sclient.insert(SendEmail(to="later"), queue="scheduled", run_at=datetime.now(UTC))
        sclient.insert(SendEmail(to="marker"), queue="marker")
        got = notifications(listener, 1)
    assert got == [("wai.jobs", "marker")]


def test_notify_bridge_commit_and_insert_many(sclient: wai.Client, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute('LISTEN "wai.jobs"')
        with psycopg.connect(database_url) as conn:
            wai.bridge.insert_job_sync(conn, SendEmail(to="x"), queue="bridged")
            conn.commit()
        sclient.insert_many(
            [
                wai.EnqueueRequest(Counter(n=1), queue="a"),
                wai.EnqueueRequest(Counter(n=2), queue="b"),
                wai.EnqueueRequest(Counter(n=3), queue="a"),
            ]
        )
        sclient.insert(SendEmail(to="marker"), queue="marker")
        got = notifications(listener, 4)
    assert got[0] == ("wai.jobs", "bridged")
    assert sorted(got[1:3]) == [("wai.jobs", "a"), ("wai.jobs", "b")]  # one per queue
    assert got[3] == ("wai.jobs", "marker")


def test_notify_insert_many_only_for_available_jobs(sclient: wai.Client, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute('LISTEN "wai.jobs"')
        later = datetime.now(UTC) + timedelta(hours=1)
        sclient.insert_many(
            [wai.EnqueueRequest(Counter(n=i), queue="later", run_at=later) for i in range(3)]
        )
        sclient.insert_many(
            [
                wai.EnqueueRequest(Counter(n=1), queue="later", run_at=later),
                wai.EnqueueRequest(Counter(n=2), queue="now"),
                wai.EnqueueRequest(Counter(n=3), queue="now"),
            ]
        )
        sclient.insert(SendEmail(to="marker"), queue="marker")
        got = notifications(listener, 2)
    assert got == [("wai.jobs", "now"), ("wai.jobs", "marker")]


# -- get_job / list_jobs ---------------------------------------------------------------


def test_get_job_not_found(shared_database_url: str) -> None:
    with (
        wai.Client(shared_database_url, max_connections=2) as client,
        pytest.raises(wai.JobNotFound, match="999999"),
    ):
        client.get_job(999_999)
    assert issubclass(wai.JobNotFound, LookupError)


def test_list_jobs_filters(sclient: wai.Client, database_url: str) -> None:
    a = sclient.insert(SendEmail(to="a"), queue="mail", tags=["vip", "eu"])
    b = sclient.insert(HTMLToPDF(url="u"), queue="pdf", tags=["eu"])
    c = sclient.insert(SendEmail(to="c"), queue="mail")
    d = sclient.insert(Counter(n=1), run_at=datetime.now(UTC) + timedelta(hours=1))
    set_state(database_url, c.id, "completed")

    assert ids(sclient.list_jobs()) == [d.id, c.id, b.id, a.id]
    assert ids(sclient.list_jobs(state="completed")) == [c.id]
    assert ids(sclient.list_jobs(state=wai.JobState.SCHEDULED)) == [d.id]
    assert ids(sclient.list_jobs(state="available")) == [b.id, a.id]
    assert ids(sclient.list_jobs(kind="send_email")) == [c.id, a.id]
    assert ids(sclient.list_jobs(queue="pdf")) == [b.id]
    assert ids(sclient.list_jobs(tag="eu")) == [b.id, a.id]
    assert ids(sclient.list_jobs(tag="vip")) == [a.id]
    assert ids(sclient.list_jobs(kind="send_email", state="available", tag="eu")) == [a.id]
    assert sclient.list_jobs(kind=HOSTILE) == []
    assert sclient.list_jobs(queue=HOSTILE, tag=HOSTILE) == []
    assert ids(sclient.list_jobs(limit=2)) == [d.id, c.id]
    [completed] = sclient.list_jobs(state="completed")
    assert completed.state == "completed"
    assert completed.finalized_at is not None


def test_list_jobs_pages_with_before_id(sclient: wai.Client) -> None:
    sclient.insert_many(Counter(n=i) for i in range(7))
    pages: list[list[int]] = []
    before: int | None = None
    while page := sclient.list_jobs(limit=3, before_id=before):
        pages.append([r.args["n"] for r in page])
        before = page[-1].id
    assert pages == [[6, 5, 4], [3, 2, 1], [0]]


@pytest.mark.parametrize(
    "options",
    [{"state": "done"}, {"state": HOSTILE}, {"limit": 0}, {"limit": 10_001}, {"limit": True}],
)
def test_list_jobs_rejects_bad_filters(shared_database_url: str, options: dict[str, Any]) -> None:
    with (
        wai.Client(shared_database_url, max_connections=2) as client,
        pytest.raises(wai.ValidationError),
    ):
        client.list_jobs(**options)


# -- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "options", "error"), bad_inserts())
def test_bad_input_is_rejected_and_writes_nothing(
    shared_database_url: str, args: Any, options: dict[str, Any], error: type[Exception]
) -> None:
    url = shared_database_url
    with wai.Client(url, max_connections=2) as client:
        with pytest.raises(error):
            client.insert(args, **options)
        with pytest.raises(error):
            client.insert_many([Counter(n=1), wai.EnqueueRequest(args, **options)])
        with pytest.raises(error):
            insert_in_transaction(client, [Counter(n=2), args], options)
    with (
        psycopg.connect(url) as conn,
        pytest.raises(error),
    ):
        wai.bridge.insert_job_sync(conn, args, **options)
    assert count_jobs(url) == 0
