"""An idle outbox sweeper backs off while LISTEN delivers, and wakes for a new row.

The ``<schema>.outbox`` triggers of migration 0015, a pass's knowledge of when its next
row is due, and a running worker's sweeper that polls less while idle yet dispatches a
rescue's follow-ups at once.
"""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest
from psycopg import sql

import wai
from tests.integration._helpers import fetch, notes, runtime_of, serving, wait_for
from tests.integration.test_outbox import (
    Charge,
    Refund,
    claimed_and_abandoned,
    make_sweeper,
    rescue,
)
from wai import _db_async as db
from wai.maintenance import SweepResult

pytestmark = pytest.mark.timeout(90)


def _refund_on_rescue(client: wai.AsyncClient, *, fail: list[bool] | None = None) -> None:
    @client.on_rescued_enqueue(Charge, name="refund")
    def refund(args: Charge, job: wai.JobRow, reason: wai.RescueReason) -> Refund:
        if fail:
            raise RuntimeError("payment API down")
        return Refund(order_id=args.order_id)


async def test_outbox_notes_come_from_rows_written_or_made_due_sooner(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    failing = [True]
    _refund_on_rescue(aclient, fail=failing)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(db.outbox_channel("wai"))))

        await claimed_and_abandoned(aclient)  # inserts and claims: no outbox row
        assert await notes(conn) == []
        await rescue(aclient)  # the rescue's outbox row
        assert await notes(conn) == [""]

        sweeper = make_sweeper(aclient, max_attempts=2)
        assert (await sweeper.run_once()).failed == 1
        assert await notes(conn) == []  # a backoff moves the row later: its sweeper knows

        await fetch(aclient, "UPDATE wai.outbox SET next_attempt_at = now() - interval '1 s'")
        assert await notes(conn) == [""]  # made due sooner
        assert (await sweeper.run_once()).failed == 1  # the second failure: marked failed
        assert await notes(conn) == []
        (entry,) = await aclient.outbox_list(state="failed")

        await aclient.outbox_retry(entry.id)  # pending again
        assert await notes(conn) == [""]
        failing.clear()
        assert (await sweeper.run_once()).dispatched == 1  # a delete sends nothing
        assert await notes(conn) == []


async def test_a_pass_knows_when_its_next_row_is_due(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    failing = [True]
    _refund_on_rescue(aclient, fail=failing)
    sweeper = make_sweeper(aclient)
    assert (await sweeper.run_once()).due_in is None  # no row at all

    await claimed_and_abandoned(aclient)
    await rescue(aclient)
    result = await sweeper.run_once()
    assert result.failed == 1
    assert result.due_in is not None
    assert 1.0 < result.due_in <= 2.0  # the first failure's backoff: 2 s
    idle = await sweeper.run_once()
    assert idle.dispatched == idle.failed == 0
    assert idle.due_in is not None
    assert 0 < idle.due_in < result.due_in

    # A due row another sweeper holds: due now for this one, which skips it.
    await fetch(aclient, "UPDATE wai.outbox SET next_attempt_at = now() - interval '1 s'")
    async with await psycopg.AsyncConnection.connect(database_url) as other:
        await other.execute("SELECT id FROM wai.outbox FOR UPDATE")
        held = await sweeper.run_once()
        assert (held.dispatched, held.failed) == (0, 0)
        assert held.due_in is not None
        assert held.due_in <= 0
        await other.rollback()
    failing.clear()
    done = await sweeper.run_once()
    assert (done.dispatched, done.due_in) == (1, None)


async def test_an_idle_sweeper_polls_less_and_wakes_for_a_rescue(
    aclient: wai.AsyncClient,
) -> None:
    _refund_on_rescue(aclient)
    async with serving(aclient, {"other": 1}, outbox_interval=0.2, idle_poll_interval=600):
        runtime = runtime_of(aclient)
        sweeper, notifier = runtime.sweeper, runtime.notifier
        assert sweeper is not None
        assert notifier is not None
        passes: list[float] = []
        run_once = sweeper.run_once

        async def counted() -> SweepResult:
            passes.append(time.monotonic())
            return await run_once()

        sweeper.run_once = counted  # type: ignore[method-assign]
        await wait_for(lambda: notifier.delivering, timeout=10)
        passes.clear()
        # Idle passes about 0.2, 0.4, 0.8, 1.6, 3.2 s apart: 5 or so in 6.5 s, where a
        # fixed interval makes 32. At 6.5 s the sweeper is in a wait of several seconds.
        await asyncio.sleep(6.5)
        assert len(passes) <= 8, passes
        row = await claimed_and_abandoned(aclient)
        await rescue(aclient)
        started = time.monotonic()
        await wait_for(lambda: aclient.list_jobs(trigger_job_id=row.id), timeout=10, interval=0.05)
        # dispatched on the note, not at the end of the wait
        assert time.monotonic() - started < 2.0
