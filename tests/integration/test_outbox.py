"""Rescue writes outbox rows; sweepers dispatch exactly one Rescued follow-up per spec."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import wai
from tests.integration._helpers import count, fetch, wait_for
from wai import _db_async as db
from wai.maintenance import OutboxSweeper, Rescuer


@dataclass
class Charge:
    order_id: int


@dataclass
class Refund:
    order_id: int


def make_sweeper(client: wai.AsyncClient) -> OutboxSweeper:
    return OutboxSweeper(client.pool, client.schema, client.registry, interval=60)


async def rescue(client: wai.AsyncClient) -> dict[str, int]:
    result = await Rescuer(client.pool, client.schema, interval=60, staleness=30).run_once()
    return result.rescued


async def claimed_and_abandoned(
    client: wai.AsyncClient, *, max_attempts: int = 25, how: str = "heartbeat"
) -> wai.JobRow:
    job = await client.insert(Charge(order_id=1), queue="q", max_attempts=max_attempts)
    async with client.connection() as conn:
        (row,) = await db.job_claim(
            conn, client.schema, queue="q", limit=1, deadlines={}, default_deadline=None
        )
    column = "heartbeat_at" if how == "heartbeat" else "deadline_at"
    await fetch(
        client,
        f"UPDATE wai.jobs SET {column} = now() - interval '1 hour' WHERE id = %s",  # type: ignore[arg-type]
        (job.id,),
    )
    return row


async def test_rescue_writes_an_outbox_row_in_its_own_transaction(
    aclient: wai.AsyncClient,
) -> None:
    row = await claimed_and_abandoned(aclient)
    assert await rescue(aclient) == {"stale_heartbeat": 1}
    job = await aclient.get_job(row.id)
    assert job.state == wai.JobState.RETRYABLE
    assert job.errors[-1]["rescued"] == "stale_heartbeat"
    rows = await fetch(aclient, "SELECT job_id, run_lease, outcome, detail FROM wai.outbox")
    assert rows == [(row.id, row.run_lease, "rescued", {"reason": "stale_heartbeat"})]


async def test_sweeper_dispatches_exactly_one_followup_per_spec(aclient: wai.AsyncClient) -> None:
    seen: list[tuple[object, ...]] = []

    @aclient.on_rescued_enqueue(Charge, name="refund")
    def refund(args: Charge, job: wai.JobRow, reason: wai.RescueReason) -> Refund:
        seen.append((args, job.state, reason))
        return Refund(order_id=args.order_id)

    aclient.on_rescued_enqueue(Charge, lambda a, j, r: Refund(order_id=-1), name="audit")
    row = await claimed_and_abandoned(aclient, max_attempts=1, how="deadline")
    assert await rescue(aclient) == {"deadline_exceeded": 1}
    sweeper = make_sweeper(aclient)
    assert (await sweeper.run_once()).dispatched == 1
    assert (await sweeper.run_once()).dispatched == 0
    follows = await aclient.list_jobs(trigger_job_id=row.id)
    assert sorted(f.trigger.spec for f in follows if f.trigger) == ["audit", "refund"]
    assert {f.trigger.run_lease for f in follows if f.trigger} == {row.run_lease}
    assert {f.trigger.outcome for f in follows if f.trigger} == {"rescued"}
    # The last attempt was rescued: failed, not retryable, so it cannot loop forever.
    assert seen == [(Charge(order_id=1), wai.JobState.FAILED, wai.RescueReason.DEADLINE_EXCEEDED)]
    assert await count(aclient, "true", None) == 3
    assert await fetch(aclient, "SELECT count(*) FROM wai.outbox") == [(0,)]


async def test_failing_closure_backs_off_and_stays_visible(aclient: wai.AsyncClient) -> None:
    broken = True

    @aclient.on_rescued_enqueue(Charge)
    def refund(args: Charge, job: wai.JobRow, reason: wai.RescueReason) -> Refund:
        if broken:
            raise RuntimeError("payment API down")
        return Refund(order_id=args.order_id)

    row = await claimed_and_abandoned(aclient)
    await rescue(aclient)
    sweeper = make_sweeper(aclient)
    result = await sweeper.run_once()
    assert (result.dispatched, result.failed) == (0, 1)
    (entry,) = await fetch(
        aclient, "SELECT attempts, last_error, next_attempt_at > now() FROM wai.outbox"
    )
    assert entry[0] == 1
    assert "payment API down" in entry[1]
    assert entry[2] is True
    assert await aclient.list_jobs(trigger_job_id=row.id) == []
    broken = False
    assert (await sweeper.run_once()).dispatched == 0  # backing off: not due yet
    await fetch(aclient, "UPDATE wai.outbox SET next_attempt_at = now()")
    assert (await sweeper.run_once()).dispatched == 1
    assert len(await aclient.list_jobs(trigger_job_id=row.id)) == 1


async def test_sweepers_without_the_specs_leave_rows_alone(aclient: wai.AsyncClient) -> None:
    await claimed_and_abandoned(aclient)
    await rescue(aclient)
    assert (await make_sweeper(aclient).run_once()).dispatched == 0
    assert await fetch(aclient, "SELECT count(*) FROM wai.outbox") == [(1,)]


SWEEPER = textwrap.dedent(
    """
    import asyncio, sys, time
    from dataclasses import dataclass
    import wai
    from wai.maintenance import OutboxSweeper

    @dataclass
    class Charge:
        order_id: int

    @dataclass
    class Refund:
        order_id: int

    async def main() -> None:
        client = wai.AsyncClient(sys.argv[1])
        def slow(args, job, reason):
            print("dispatching", flush=True)
            time.sleep(30)
            return Refund(order_id=args.order_id)
        client.on_rescued_enqueue(Charge, slow, name="refund")
        async with client:
            await OutboxSweeper(client.pool, client.schema, client.registry, interval=60).run_once()

    asyncio.run(main())
    """
)


@pytest.mark.slow
async def test_sweeper_killed_mid_dispatch_loses_and_duplicates_nothing(
    aclient: wai.AsyncClient, database_url: str, tmp_path: Path
) -> None:
    @aclient.on_rescued_enqueue(Charge, name="refund")
    def refund(args: Charge, job: wai.JobRow, reason: wai.RescueReason) -> Refund:
        return Refund(order_id=args.order_id)

    row = await claimed_and_abandoned(aclient)
    await rescue(aclient)
    script = tmp_path / "sweeper.py"
    script.write_text(SWEEPER)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), database_url, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.strip() == b"dispatching"
        # The other sweeper holds the row: ours skips it rather than dispatching twice.
        assert (await make_sweeper(aclient).run_once()).dispatched == 0
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

    async def dispatched() -> int:
        # The killed sweeper's row lock lasts until PostgreSQL notices its backend is gone.
        return (await make_sweeper(aclient).run_once()).dispatched

    await wait_for(dispatched, timeout=10, what="dispatch")
    follows = await aclient.list_jobs(trigger_job_id=row.id)
    assert len(follows) == 1
    assert await fetch(aclient, "SELECT count(*) FROM wai.outbox") == [(0,)]


async def test_runtime_rescues_dispatches_and_fires_rescued_hook(aclient: wai.AsyncClient) -> None:
    events: list[wai.events.Rescued] = []
    aclient.on_event(
        Charge, lambda e: events.append(e) if isinstance(e, wai.events.Rescued) else None
    )
    aclient.on_rescued_enqueue(Charge, lambda a, j, r: Refund(order_id=a.order_id), name="refund")
    row = await claimed_and_abandoned(aclient)
    await aclient.start(
        {"other": 1},
        rescue_interval=0.1,
        heartbeat_interval=0.2,
        heartbeat_staleness=0.6,
        election_interval=0.2,
        outbox_interval=0.1,
        promote_interval=3600,
    )
    try:
        await wait_for(
            lambda: aclient.list_jobs(trigger_job_id=row.id), timeout=10, what="the follow-up"
        )
        await wait_for(lambda: events, timeout=5, what="the Rescued hook")
    finally:
        await aclient.shutdown(timeout=5)
    assert events[0].reason == "stale_heartbeat"
    assert events[0].job.state == wai.JobState.RETRYABLE
