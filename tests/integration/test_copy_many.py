"""client.copy_many: bulk loads with COPY, against a real PostgreSQL.

A copied job must be stored exactly as ``insert_many`` stores the same item; what COPY
cannot do (unique jobs) is refused before anything is written.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest
from psycopg import sql

import wai
from tests.factories import HOSTILE, Counter, SendEmail, count_jobs
from wai import _db_async as db

# what a COPY text row must escape: tab, newline, carriage return, backslash, and what
# an array literal must quote: braces, commas, double quotes, spaces, NULL-like words
AWKWARD = 'a\tb\nc\rd\\e{f},g"h i NULL \\N ü\U0001f680 $$;--'


def awkward_items(n: int) -> list[Any]:
    when = datetime(2031, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    items: list[Any] = []
    for i in range(n):
        if i % 3 == 0:
            items.append(Counter(n=i))
        elif i % 3 == 1:
            items.append(SendEmail(to=f"{AWKWARD}{i}", subject=HOSTILE))
        else:
            items.append(
                wai.EnqueueRequest(
                    {"q": AWKWARD, "n": i, "big": 2**70, "f": 0.1, "z": "\\u0000", "l": [None]},
                    kind="awkward_data",
                    queue=f"q{i % 5}",
                    priority=1 + i % 4,
                    max_attempts=3 + i % 7,
                    run_at=when if i % 4 == 2 else None,
                    tags=[AWKWARD, f"t{i}", " ", "NULL"] if i % 2 else [],
                    metadata={AWKWARD: i, "nested": {"a": [1, None]}},
                    ordering_key=f"{AWKWARD}:{i}",
                )
            )
    return items


def by_content(rows: list[wai.JobRow]) -> list[dict[str, Any]]:
    """The rows as :func:`comparable` dicts, in an order that ignores their ids: COPY
    writes the jobs that take the default run_at first, then the scheduled ones."""
    return sorted((comparable(r) for r in rows), key=lambda f: (f["kind"], repr(f["args"])))


def comparable(row: wai.JobRow) -> dict[str, Any]:
    """A row without what differs between two inserts of the same item."""
    fields = dataclasses.asdict(row)
    for name in ("id", "created_at"):
        fields.pop(name)
    if row.state is wai.JobState.AVAILABLE:
        fields.pop("run_at")  # now() of each statement
    return fields


async def test_copied_jobs_are_stored_as_insert_many_stores_them(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    items = awkward_items(300)
    assert await aclient.copy_many(items) == len(items)
    copied = await aclient.list_jobs(limit=1000)
    inserted = await aclient.insert_many(items)
    assert len(copied) == len(inserted) == len(items)
    assert by_content(copied) == by_content(inserted)
    available = sorted((r for r in copied if r.state is wai.JobState.AVAILABLE), key=lambda r: r.id)
    # ids follow the input order among the jobs of one COPY
    assert [r.args.get("n") for r in available] == [
        r.args.get("n") for r in inserted if r.state is wai.JobState.AVAILABLE
    ]
    assert {r.state for r in copied} == {wai.JobState.AVAILABLE, wai.JobState.SCHEDULED}
    assert count_jobs(database_url) == 2 * len(items)


async def test_copy_many_refuses_unique_jobs_and_writes_nothing(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    with pytest.raises(wai.ValidationError, match="unique"):
        await aclient.copy_many(
            [Counter(n=1), wai.EnqueueRequest(SendEmail(to="x"), unique=wai.UniqueOpts())]
        )
    assert count_jobs(database_url) == 0


@pytest.mark.parametrize(
    "bad",
    [
        wai.EnqueueRequest(Counter(n=2), priority=9),
        wai.EnqueueRequest(Counter(n=2), queue="no spaces"),
        {"no": "kind"},
        wai.EnqueueRequest(Counter(n=2), run_at=datetime(2030, 1, 1)),  # naive
    ],
)
async def test_copy_many_with_an_invalid_item_writes_nothing(
    aclient: wai.AsyncClient, database_url: str, bad: Any
) -> None:
    with pytest.raises(wai.ValidationError):
        await aclient.copy_many([Counter(n=1), bad, Counter(n=3)])
    assert count_jobs(database_url) == 0


async def test_copy_many_of_nothing_writes_nothing(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    assert await aclient.copy_many([]) == 0
    assert count_jobs(database_url) == 0


async def test_copy_many_wakes_each_queue_of_an_available_job_once(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as listener:
        await listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(db.channel("wai"))))
        await aclient.copy_many(
            [
                wai.EnqueueRequest(Counter(n=1), queue="a"),
                wai.EnqueueRequest(Counter(n=2), queue="b"),
                wai.EnqueueRequest(Counter(n=3), queue="a"),
                wai.EnqueueRequest(Counter(n=4), queue="later", run_at=later),  # scheduled
            ]
        )
        payloads = [n.payload async for n in listener.notifies(timeout=2)]
    assert sorted(payloads) == ["a", "b"]


async def test_copy_many_in_a_transaction_commits_or_rolls_back_with_it(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    class Boom(Exception):
        pass

    copied: list[int] = []

    async def load_then_fail() -> None:
        async with aclient.transaction() as tx:
            copied.append(await tx.copy_many([Counter(n=1), Counter(n=2)]))
            raise Boom

    with pytest.raises(Boom):
        await load_then_fail()
    assert copied == [2]  # written, then rolled back with the transaction
    assert count_jobs(database_url) == 0
    async with aclient.transaction() as tx:
        assert await tx.copy_many([Counter(n=1), Counter(n=2)]) == 2
    assert count_jobs(database_url) == 2


async def test_copied_jobs_are_claimed_and_run(aclient: wai.AsyncClient) -> None:
    done: list[int] = []

    @aclient.task(Counter, queue="copied")
    async def count(job: wai.Job[Counter]) -> None:
        done.append(job.args.n)

    await aclient.copy_many([Counter(n=i) for i in range(50)])
    await aclient.run({"copied": 8}, burst=True)
    assert sorted(done) == list(range(50))


def test_sync_copy_many(sclient: wai.Client, database_url: str) -> None:
    client = sclient
    items = awkward_items(30)
    assert client.copy_many(items) == len(items)
    assert by_content(client.list_jobs(limit=100)) == by_content(client.insert_many(items))
    with pytest.raises(wai.ValidationError, match="unique"):
        client.copy_many([wai.EnqueueRequest(Counter(n=1), unique=wai.UniqueOpts())])
    with client.transaction() as tx:
        assert tx.copy_many([Counter(n=1)]) == 1
    assert count_jobs(database_url) == 2 * len(items) + 1
