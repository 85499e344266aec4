"""What operators see of callbacks, on both clients: the jobs parked on one, soonest timeout
first in cursor pages, and the recent callback timeouts that maintenance recorded.

Jobs are parked through the database seam as in ``test_callbacks.py``, and timeouts are
real rescues by the maintenance service, so the listings read what wai writes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

import wai
from tests.integration._helpers import Admin, fetch
from tests.integration.test_callbacks import claimed, expire, parked, waiting_in_place
from wai.maintenance import Rescuer

pytestmark = pytest.mark.timeout(60)


def ids(items: list[Any]) -> list[int]:
    return [item.job.id for item in items]


async def rescue(client: wai.AsyncClient) -> dict[str, int]:
    result = await Rescuer(client.pool, client.schema, interval=60, staleness=30).run_once()
    return result.rescued


# -- waiting jobs ---------------------------------------------------------------------------


async def test_waiting_jobs_come_soonest_timeout_first_with_their_callback(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    late, late_cid = await parked(aclient, timeout=3600)
    soon, soon_cid = await parked(aclient, timeout=60)
    in_place, in_place_cid = await waiting_in_place(aclient)  # 3600 s
    overdue, _ = await parked(aclient, timeout=600)
    await expire(aclient, overdue.id)
    running, _ = await claimed(aclient)  # registered, not parked: not waiting
    await aclient.insert({}, kind="other")  # available

    waiting = await admin("list_waiting")
    assert ids(waiting) == [overdue.id, soon.id, late.id, in_place.id]
    assert running.id not in ids(waiting)
    by_id = {w.job.id: w for w in waiting}
    assert [w.overdue for w in waiting] == [True, False, False, False]
    assert by_id[soon.id].callback_id == soon_cid
    assert by_id[late.id].callback_id == late_cid
    assert by_id[in_place.id].callback_id == in_place_cid
    assert by_id[soon.id].timeout_at == soon.callback_timeout_at
    assert by_id[in_place.id].in_place
    assert not by_id[late.id].in_place
    assert all(w.job.state == "waiting_external" for w in waiting)
    assert isinstance(by_id[late.id].job.attempted_at, datetime)  # the attempt that parked


async def test_waiting_jobs_page_by_cursor_through_equal_timeouts(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    rows = [(await parked(aclient))[0] for _ in range(7)]
    # three share one timeout: the id breaks the tie, and no page repeats or skips one
    await fetch(
        aclient,
        "UPDATE wai.jobs SET callback_timeout_at = '2030-01-01T00:00:00Z' WHERE id = ANY(%s)",
        ([rows[1].id, rows[4].id, rows[5].id],),
    )
    everything = await admin("list_waiting")
    assert len(everything) == 7
    pages: list[list[int]] = []
    after = None
    while page := await admin("list_waiting", limit=2, after=after):
        pages.append(ids(page))
        after = page[-1].cursor
    assert [i for page in pages for i in page] == ids(everything)
    assert all(len(page) == 2 for page in pages[:-1])
    tied = [w.job.id for w in everything if w.timeout_at.year == 2030]
    assert tied == sorted([rows[1].id, rows[4].id, rows[5].id])


async def test_waiting_jobs_filtered_by_queue_and_kind(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    a, _ = await parked(aclient)
    b, _ = await parked(aclient)
    c, _ = await parked(aclient)
    await fetch(aclient, "UPDATE wai.jobs SET queue = 'billing' WHERE id = %s", (b.id,))
    await fetch(aclient, "UPDATE wai.jobs SET kind = 'refund' WHERE id IN (%s, %s)", (b.id, c.id))
    assert ids(await admin("list_waiting", queue="billing")) == [b.id]
    assert ids(await admin("list_waiting", kind="refund")) == [b.id, c.id]
    assert ids(await admin("list_waiting", kind="pay")) == [a.id]
    assert ids(await admin("list_waiting", queue="q", kind="refund")) == [c.id]
    assert await admin("list_waiting", queue="nowhere") == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"after": "nope"}, "invalid waiting-job cursor"),
        ({"after": "2026-01-01T00:00:00/3"}, "invalid waiting-job cursor"),
        ({"after": 12}, "invalid waiting-job cursor"),
        ({"limit": 0}, "limit must be an integer from 1 to 10000"),
        ({"limit": True}, "limit must be an integer"),
        ({"kind": "a\x00b"}, "kind: contains a NUL byte"),
        ({"queue": "not a queue"}, "queue"),
    ],
)
async def test_list_waiting_refuses_bad_options(
    shared_database_url: str, options: dict[str, Any], message: str
) -> None:
    async with wai.AsyncClient(shared_database_url, max_connections=2) as client:
        with pytest.raises(wai.ValidationError, match=message):
            await client.list_waiting(**options)


# -- recent callback timeouts -----------------------------------------------------------------


async def test_callback_timeouts_as_maintenance_recorded_them(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    await fetch(aclient, "INSERT INTO wai.queues (name, dlq) VALUES ('dead', true)")
    retried, _ = await parked(aclient)  # has attempts left: retryable
    exhausted, _ = await parked(aclient, max_attempts=1)  # its last attempt: failed
    lettered, _ = await parked(aclient, max_attempts=1)  # failed in a DLQ queue
    await fetch(aclient, "UPDATE wai.jobs SET queue = 'dead' WHERE id = %s", (lettered.id,))
    again, _ = await parked(aclient)  # timed out, then its retry came due
    still, _ = await parked(aclient)  # not timed out
    for row in (retried, exhausted, lettered, again):
        await expire(aclient, row.id)
    assert await rescue(aclient) == {"callback_timeout": 4}
    await fetch(  # what promotion does once the backoff passed
        aclient,
        "UPDATE wai.jobs SET state = 'available', run_at = now() WHERE id = %s",
        (again.id,),
    )
    stale, cid = await claimed(aclient)  # a dead in-place waiter: stale, not a timeout
    await fetch(
        aclient,
        "UPDATE wai.jobs SET state = 'waiting_external', heartbeat_at = now() - interval '1 h'"
        " WHERE id = %s",
        (stale.id,),
    )
    assert await rescue(aclient) == {"stale_heartbeat": 1}
    assert cid

    found = await admin("list_callback_timeouts")
    assert sorted(ids(found)) == sorted([retried.id, exhausted.id, lettered.id])
    by_id = {t.job.id: t for t in found}
    assert by_id[retried.id].job.state == "retryable"
    assert by_id[exhausted.id].job.state == "failed"
    assert not by_id[retried.id].dead_lettered
    assert not by_id[exhausted.id].dead_lettered
    assert by_id[lettered.id].dead_lettered
    entry = await aclient.get_dlq_entry(lettered.id)
    assert entry.reason == "callback_timeout"
    assert by_id[lettered.id].timed_out_at == entry.dlq_at
    row = await aclient.get_job(retried.id)
    assert by_id[retried.id].timed_out_at == datetime.fromisoformat(row.errors[-1]["at"])
    times = [t.timed_out_at for t in found]
    assert all(t is not None for t in times)
    assert times == sorted(times, reverse=True)  # type: ignore[type-var]
    assert still.id not in by_id

    assert ids(await admin("list_callback_timeouts", queue="dead")) == [lettered.id]
    assert ids(await admin("list_callback_timeouts", kind="nope")) == []
    assert len(await admin("list_callback_timeouts", limit=1)) == 1


async def test_newest_callback_timeout_first(aclient: wai.AsyncClient) -> None:
    first, _ = await parked(aclient)
    await expire(aclient, first.id)
    await rescue(aclient)
    second, _ = await parked(aclient)
    await expire(aclient, second.id)
    await rescue(aclient)
    assert ids(await aclient.list_callback_timeouts()) == [second.id, first.id]
    # a hand-edited error entry without a readable time comes last, not as an error
    await fetch(
        aclient,
        "UPDATE wai.jobs SET errors = jsonb_set(errors, '{-1,at}', '\"soon\"') WHERE id = %s",
        (second.id,),
    )
    listed = await aclient.list_callback_timeouts()
    assert ids(listed) == [first.id, second.id]
    assert listed[1].timed_out_at is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"limit": 0}, "limit must be an integer from 1 to 1000"),
        ({"limit": 1001}, "limit must be an integer from 1 to 1000"),
        ({"kind": "\udc80"}, "kind: contains a lone surrogate"),
    ],
)
async def test_list_callback_timeouts_refuses_bad_options(
    shared_database_url: str, options: dict[str, Any], message: str
) -> None:
    with (
        wai.Client(shared_database_url, max_connections=2) as client,
        pytest.raises(wai.ValidationError, match=message),
    ):
        client.list_callback_timeouts(**options)
