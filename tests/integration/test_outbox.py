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
from tests.factories import execute
from tests.integration._helpers import count, fetch, wait_for
from wai.maintenance import Cleaner, OutboxSweeper, Rescuer, SweepResult
from wai.worker import _queries as worker_db


@dataclass
class Charge:
    order_id: int


@dataclass
class Refund:
    order_id: int


@dataclass
class Blocked:
    order_id: int


def make_sweeper(
    client: wai.AsyncClient, *, batch_size: int = 100, max_attempts: int = 10
) -> OutboxSweeper:
    return OutboxSweeper(
        client.pool,
        client.schema,
        client.registry,
        interval=60,
        batch_size=batch_size,
        max_attempts=max_attempts,
    )


async def rescue(client: wai.AsyncClient) -> dict[str, int]:
    result = await Rescuer(client.pool, client.schema, interval=60, staleness=30).run_once()
    return result.rescued


async def claimed_and_abandoned(
    client: wai.AsyncClient, *, max_attempts: int = 25, how: str = "heartbeat", order_id: int = 1
) -> wai.JobRow:
    job = await client.insert(Charge(order_id=order_id), queue="q", max_attempts=max_attempts)
    async with client._connection() as conn:
        (row,) = await worker_db.job_claim(
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


# -- poison rows ---------------------------------------------------------------------------


async def rescued(client: wai.AsyncClient, order_id: int) -> wai.JobRow:
    """A job of ``Charge(order_id)`` rescued on its own: one outbox row, ids in call order."""
    row = await claimed_and_abandoned(client, order_id=order_id)
    assert await rescue(client) == {"stale_heartbeat": 1}
    return row


async def outbox_rows(client: wai.AsyncClient) -> dict[int, tuple[int, str | None, bool, bool]]:
    """job id -> (attempts, last_error, backing off, failed) of every outbox row."""
    rows = await fetch(
        client,
        "SELECT job_id, attempts, last_error, next_attempt_at > now(), failed_at IS NOT NULL"
        " FROM wai.outbox",
    )
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}


async def followed(client: wai.AsyncClient, *rows: wai.JobRow) -> list[int]:
    """How many follow-ups each of ``rows`` has."""
    return [len(await client.list_jobs(trigger_job_id=r.id)) for r in rows]


async def test_poison_rows_are_recorded_and_the_rows_behind_them_dispatched(
    aclient: wai.AsyncClient,
) -> None:
    # PostgreSQL refuses follow-ups of kind "blocked", as a lock timeout would.
    await fetch(
        aclient,
        "CREATE FUNCTION wai.refuse_insert() RETURNS trigger LANGUAGE plpgsql AS $$"
        " BEGIN RAISE EXCEPTION 'could not obtain lock on relation jobs'"
        " USING ERRCODE = 'lock_not_available'; END $$",
    )
    await fetch(
        aclient,
        "CREATE TRIGGER refuse BEFORE INSERT ON wai.jobs FOR EACH ROW"
        " WHEN (NEW.kind = 'blocked') EXECUTE FUNCTION wai.refuse_insert()",
    )

    @aclient.on_rescued_enqueue(Charge, name="refund")
    def refund(args: Charge, job: wai.JobRow, reason: wai.RescueReason) -> object:
        if args.order_id == 1:
            raise TypeError("unsupported operand type(s) for +: 'int' and 'str'")
        if args.order_id == 2:
            return Blocked(order_id=2)
        return Refund(order_id=args.order_id)

    rows = [await rescued(aclient, order_id=n) for n in (1, 2, 3, 4, 5)]
    # the third row's job snapshot does not parse (a broken or foreign writer)
    await fetch(
        aclient,
        "UPDATE wai.outbox SET job = jsonb_set(job, '{created_at}', '\"yesterday\"')"
        " WHERE job_id = %s",
        (rows[2].id,),
    )

    result = await make_sweeper(aclient).run_once()

    assert (result.dispatched, result.failed) == (2, 3)
    left = await outbox_rows(aclient)
    assert set(left) == {rows[0].id, rows[1].id, rows[2].id}
    for attempts, _error, backing_off, failed in left.values():
        assert (attempts, backing_off, failed) == (1, True, False)
    assert "TypeError: unsupported operand type(s) for +: 'int' and 'str'" in str(
        left[rows[0].id][1]
    )
    assert str(left[rows[1].id][1]).startswith(
        "LockNotAvailable: could not obtain lock on relation jobs"
    )
    assert str(left[rows[2].id][1]).startswith("ValueError: ")
    # The rows behind the poison went in the same sweep, one follow-up each.
    assert await followed(aclient, *rows) == [0, 0, 0, 1, 1]


async def test_a_nul_byte_in_the_error_is_still_recorded(aclient: wai.AsyncClient) -> None:
    @aclient.on_rescued_enqueue(Charge, name="refund")
    def refund(args: Charge, job: wai.JobRow, reason: wai.RescueReason) -> Refund:
        if args.order_id == 1:
            raise RuntimeError("bad byte \x00 and \udc80 in the reply")
        return Refund(order_id=args.order_id)

    poison, good = [await rescued(aclient, order_id=n) for n in (1, 2)]
    result = await make_sweeper(aclient).run_once()
    assert (result.dispatched, result.failed) == (1, 1)
    ((attempts, error, backing_off, failed),) = (await outbox_rows(aclient)).values()
    assert (attempts, backing_off, failed) == (1, True, False)
    assert "RuntimeError: bad byte \\x00 and \\udc80 in the reply" in str(error)
    assert await followed(aclient, poison, good) == [0, 1]


async def test_a_row_that_keeps_failing_ends_failed_until_an_operator_acts(
    aclient: wai.AsyncClient,
) -> None:
    broken = True

    @aclient.on_rescued_enqueue(Charge, name="refund")
    def refund(args: Charge, job: wai.JobRow, reason: wai.RescueReason) -> Refund:
        if broken:
            raise RuntimeError("payment API down")
        return Refund(order_id=args.order_id)

    first, second = [await rescued(aclient, order_id=n) for n in (1, 2)]
    sweeper = make_sweeper(aclient, max_attempts=3)
    for attempt in (1, 2, 3):
        assert (await sweeper.run_once()).failed == 2
        await fetch(aclient, "UPDATE wai.outbox SET next_attempt_at = now()")  # due again
        assert await aclient.outbox_stats() == wai.OutboxStats(
            pending=0 if attempt == 3 else 2,
            failed=2 if attempt == 3 else 0,
            oldest_pending_at=None if attempt == 3 else (await aclient.outbox_list())[0].created_at,
        )
    # Failed: sweepers leave the rows alone, however due they are.
    assert (await sweeper.run_once()) == SweepResult(0, 0)
    failed = await aclient.outbox_list(state="failed")
    assert [(e.job_id, e.state, e.attempts) for e in failed] == [
        (first.id, "failed", 3),
        (second.id, "failed", 3),
    ]
    assert all(e.failed_at is not None for e in failed)
    assert all("RuntimeError: payment API down" in str(e.last_error) for e in failed)
    assert await aclient.outbox_list(state="pending") == []
    assert await aclient.outbox_list(kind="other") == []
    assert [e.id for e in await aclient.outbox_list(after_id=failed[0].id)] == [failed[1].id]

    # Retention never deletes them, however old.
    await fetch(aclient, "UPDATE wai.outbox SET created_at = now() - interval '365 days'")
    cleaner = Cleaner(
        aclient.pool, aclient.schema, interval=60, completed=1, failed=1, cancelled=1, outbox=1
    )
    assert (await cleaner.run_once()).outbox == 0

    broken = False
    retried = await aclient.outbox_retry(failed[0].id)
    assert (retried.state, retried.attempts, retried.failed_at) == ("pending", 0, None)
    assert "payment API down" in str(retried.last_error)  # kept until the next attempt
    # Retried (attempts 0 again), still not an orphan for retention: it failed before.
    assert (await cleaner.run_once()).outbox == 0
    assert await aclient.outbox_discard(failed[1].id) is True
    assert await aclient.outbox_discard(failed[1].id) is False
    with pytest.raises(wai.OutboxRowNotFound):
        await aclient.outbox_retry(failed[1].id)
    assert (await sweeper.run_once()) == SweepResult(1, 0)
    assert await followed(aclient, first, second) == [1, 0]
    assert await aclient.outbox_stats() == wai.OutboxStats(
        pending=0, failed=0, oldest_pending_at=None
    )


async def test_outbox_admin_rejects_bad_input(aclient: wai.AsyncClient) -> None:
    with pytest.raises(wai.ValidationError):
        await aclient.outbox_list(state="dead")
    with pytest.raises(wai.ValidationError):
        await aclient.outbox_list(limit=0)
    for bad in (0, -1, 2**63, True, "1"):
        with pytest.raises(wai.ValidationError):
            await aclient.outbox_retry(bad)  # type: ignore[arg-type]
        with pytest.raises(wai.ValidationError):
            await aclient.outbox_discard(bad)  # type: ignore[arg-type]


def test_the_sync_client_lists_retries_and_discards(database_url: str, sclient: wai.Client) -> None:
    jobs = [sclient.insert(Charge(order_id=n), queue="q") for n in (1, 2)]
    for job in jobs:
        execute(
            database_url,
            "INSERT INTO wai.outbox (job_id, run_lease, kind, outcome, job, attempts,"
            " last_error, failed_at)"
            " SELECT id, run_lease, kind, 'rescued', to_jsonb(j), 10, 'RuntimeError: boom', now()"
            " FROM wai.jobs AS j WHERE id = %s",
            (job.id,),
        )
    entries = sclient.outbox_list(state="failed")
    assert [(e.job_id, e.state, e.last_error) for e in entries] == [
        (j.id, "failed", "RuntimeError: boom") for j in jobs
    ]
    assert sclient.outbox_stats().failed == 2
    assert sclient.outbox_retry(entries[0].id).state == "pending"
    assert sclient.outbox_discard(entries[1].id) is True
    assert sclient.outbox_discard(entries[1].id) is False
    assert [(e.id, e.state) for e in sclient.outbox_list()] == [(entries[0].id, "pending")]
    stats = sclient.outbox_stats()
    assert (stats.pending, stats.failed) == (1, 0)
    assert stats.oldest_pending_at == entries[0].created_at


async def test_two_sweepers_in_parallel_dispatch_each_row_once(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    aclient.on_rescued_enqueue(Charge, lambda a, j, r: Refund(order_id=a.order_id), name="refund")
    n = 60
    await aclient.insert_many([wai.EnqueueRequest(Charge(order_id=i), queue="q") for i in range(n)])
    async with aclient._connection() as conn:
        claimed = await worker_db.job_claim(
            conn, aclient.schema, queue="q", limit=n, deadlines={}, default_deadline=None
        )
    assert len(claimed) == n
    await fetch(aclient, "UPDATE wai.jobs SET heartbeat_at = now() - interval '1 hour'")
    assert await rescue(aclient) == {"stale_heartbeat": n}

    other = wai.AsyncClient(database_url)
    other.on_rescued_enqueue(Charge, lambda a, j, r: Refund(order_id=a.order_id), name="refund")
    async with other:
        one = make_sweeper(aclient, batch_size=7)
        two = make_sweeper(other, batch_size=7)
        results = await asyncio.gather(*(s.run_once() for s in (one, two, one, two)))
        results += await asyncio.gather(one.run_once(), two.run_once())  # stragglers, if any
    assert sum(r.dispatched for r in results) == n
    assert sum(r.failed for r in results) == 0
    assert await fetch(aclient, "SELECT count(*) FROM wai.outbox") == [(0,)]
    per_trigger = await fetch(
        aclient,
        "SELECT trigger_job_id, count(*) FROM wai.jobs"
        " WHERE trigger_job_id IS NOT NULL GROUP BY trigger_job_id",
    )
    assert sorted(per_trigger) == sorted((row.id, 1) for row in claimed)


async def test_a_connection_lost_mid_sweep_ends_the_pass_and_the_next_retries(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    kills = 0

    @aclient.on_rescued_enqueue(Charge, name="refund")
    def refund(args: Charge, job: wai.JobRow, reason: wai.RescueReason) -> Refund:
        nonlocal kills
        if kills == 0:
            kills += 1
            # The sweeper's own connection sits idle in its transaction right now.
            execute(
                database_url,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND state = 'idle in transaction'",
            )
        return Refund(order_id=args.order_id)

    rows = [await rescued(aclient, order_id=n) for n in (1, 2)]
    sweeper = make_sweeper(aclient)
    assert await sweeper.run_once() == SweepResult(0, 0)  # logged, nothing recorded
    assert {v[0] for v in (await outbox_rows(aclient)).values()} == {0}
    assert await sweeper.run_once() == SweepResult(2, 0)
    assert await followed(aclient, *rows) == [1, 1]
