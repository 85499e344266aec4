"""The dead-letter queue against a real PostgreSQL: routing where jobs fail (worker
outcomes, rescue, external callbacks), in the failure's transaction, and the operator
methods on both clients: list, get, depth, retry, move, purge, retention.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import wai
from tests.integration._helpers import FLAVORS, Admin, Work, count, db_now, fetch, serving, wait_for
from wai._outcomes import Outcome
from wai.callbacks import CallbackExpressions
from wai.callbacks import _queries_async as callback_db
from wai.maintenance import Cleaner, Rescuer
from wai.transitions._finalize import apply_outcomes
from wai.worker import _queries as worker_db

pytestmark = pytest.mark.timeout(60)


@dataclass
class Failed:
    """Follow-up of an exhausted job."""

    of: int


@dataclass
class Done:
    """Follow-up of a completed job."""

    of: int


async def dlq_on(client: wai.AsyncClient, queue: str = "q", on: bool = True) -> None:
    """Set the queue's dead-letter policy as a worker serving it would."""
    await fetch(
        client,
        "INSERT INTO wai.queues (name, dlq) VALUES (%s, %s)"
        " ON CONFLICT (name) DO UPDATE SET dlq = excluded.dlq",
        (queue, on),
    )


async def failed_job(
    client: wai.AsyncClient, *, queue: str = "q", tags: tuple[str, ...] = (), **insert: Any
) -> wai.JobRow:
    """A job of ``queue`` forced into ``failed`` (as a worker leaves it)."""
    row = await client.insert(Work(), queue=queue, tags=tags, **insert)
    await fetch(
        client,
        "UPDATE wai.jobs SET state = 'failed', attempt = 3, max_attempts = 3, run_lease = 3,"
        " attempted_at = now(), finalized_at = now(),"
        ' errors = \'[{"error": "boom", "attempt": 3, "at": "2026-01-01T00:00:00+00:00"}]\''
        " WHERE id = %s",
        (row.id,),
    )
    return await client.get_job(row.id)


async def dead(client: wai.AsyncClient, **kw: Any) -> wai.JobRow:
    """A failed job moved to the dead-letter queue by an operator."""
    row = await failed_job(client, **kw)
    entry = await client.move_to_dlq(row.id)
    return entry.job


async def claim(client: wai.AsyncClient, queue: str = "q") -> wai.JobRow:
    async with client._connection() as conn:
        [row] = await worker_db.job_claim(
            conn, client.schema, queue=queue, limit=1, deadlines={}, default_deadline=None
        )
    return row


# -- routing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raise_", "reason"),
    [("terminal", "terminal_error"), ("retryable", "max_attempts_exhausted")],
)
async def test_a_failing_job_of_a_dlq_queue_moves_with_its_exhausted_followups(
    aclient: wai.AsyncClient, raise_: str, reason: str
) -> None:
    @aclient.task(Work, queue="q")
    async def handler(job: wai.Job[Work]) -> None:
        if raise_ == "terminal":
            raise wai.TerminalError("bad card")
        raise RuntimeError("flaky")

    aclient.on_exhausted_enqueue(Work, lambda args, job, error, attempt: Failed(of=job.id))
    row = await aclient.insert(Work(n=1), max_attempts=1)
    async with serving(aclient, {"q": wai.QueueConfig(concurrency=2, dlq=True)}):
        entry = await wait_for(lambda: aclient.list_dlq(), what="a dead-letter entry")
    [entry] = entry
    assert entry.reason == reason
    assert entry.job.id == row.id
    assert entry.job.state == "failed"
    assert entry.job.run_lease == 1
    assert entry.job.errors[-1]["attempt"] == 1
    assert await count(aclient, "id = %s", (row.id,)) == 0  # out of the jobs table
    with pytest.raises(wai.JobNotFound, match="is in the dead-letter queue"):
        await aclient.get_job(row.id)
    # the Exhausted follow-up committed with the move, pointing at the dead job
    [(args, trig)] = await fetch(
        aclient, "SELECT args, trigger_job_id FROM wai.jobs WHERE kind = 'failed'"
    )
    assert (args, trig) == ({"of": row.id}, row.id)
    [(stored,)] = await fetch(aclient, "SELECT dlq FROM wai.queues WHERE name = 'q'")
    assert stored is True


async def test_start_dlq_is_the_default_of_every_served_queue_and_config_overrides_it(
    aclient: wai.AsyncClient,
) -> None:
    @aclient.task(Work, queue="q")
    async def handler(job: wai.Job[Work]) -> None:
        raise wai.TerminalError("no")

    on = await aclient.insert(Work(), queue="q")
    off = await aclient.insert(Work(), queue="kept")
    async with serving(aclient, {"q": 2, "kept": wai.QueueConfig(dlq=False)}, dlq=True):
        await wait_for(lambda: aclient.dlq_depth(), what="q's job dead-lettered")
        await wait_for(
            lambda: count(aclient, "id = %s AND state = 'failed'", (off.id,)), what="kept failed"
        )
    assert (await aclient.get_dlq_entry(on.id)).reason == "terminal_error"
    assert await aclient.dlq_depths() == {"q": 1}
    rows = await fetch(aclient, "SELECT name, dlq FROM wai.queues ORDER BY name")
    assert rows == [("kept", False), ("q", True)]


async def test_a_queue_without_dlq_keeps_its_failed_jobs(aclient: wai.AsyncClient) -> None:
    row = await aclient.insert(Work(), queue="q", max_attempts=1)
    claimed = await claim(aclient)
    fail = Outcome(
        job_id=row.id,
        run_lease=claimed.run_lease,
        state=wai.JobState.FAILED,
        event="exhausted",
        error="x",
        terminal=True,
    )
    async with aclient._connection() as conn:
        applied = await apply_outcomes(conn, aclient.schema, aclient.registry, [fail])
    assert applied.dead_lettered == {}
    assert (await aclient.get_job(row.id)).state == "failed"
    assert await aclient.dlq_depth() == 0


@pytest.mark.parametrize("with_rows", [True, False])
async def test_a_failure_moves_whether_or_not_its_row_is_read(
    aclient: wai.AsyncClient, with_rows: bool
) -> None:
    """with_rows=False is the finalizer's batch that no spec or hook reads: ids come back only."""
    await dlq_on(aclient)
    failing = await aclient.insert(Work(n=1), queue="q", max_attempts=1)
    passing = await aclient.insert(Work(n=2), queue="q")
    one, two = await claim(aclient), await claim(aclient)
    assert {one.id, two.id} == {failing.id, passing.id}
    outcomes = [
        Outcome(
            job_id=failing.id,
            run_lease=1,
            state=wai.JobState.FAILED,
            event="exhausted",
            error="x",
            terminal=True,
        ),
        Outcome(job_id=passing.id, run_lease=1, state=wai.JobState.COMPLETED, event="completed"),
    ]
    async with aclient._connection() as conn:
        applied = await apply_outcomes(
            conn, aclient.schema, aclient.registry, outcomes, with_rows=with_rows
        )
    assert applied.dead_lettered == {failing.id: "terminal_error"}
    assert sorted(r.id for r in applied.rows) == ([failing.id, passing.id] if with_rows else [])
    assert (await aclient.get_dlq_entry(failing.id)).job.errors[-1]["error"] == "x"
    assert (await aclient.get_job(passing.id)).state == "completed"


@pytest.mark.parametrize("with_rows", [True, False])
async def test_a_stale_outcome_moves_nothing(aclient: wai.AsyncClient, with_rows: bool) -> None:
    await dlq_on(aclient)
    row = await aclient.insert(Work(), queue="q")
    claimed = await claim(aclient)
    stale = Outcome(
        job_id=row.id,
        run_lease=claimed.run_lease - 1,
        state=wai.JobState.FAILED,
        event="exhausted",
        error="late",
        terminal=True,
    )
    async with aclient._connection() as conn:
        applied = await apply_outcomes(
            conn, aclient.schema, aclient.registry, [stale], with_rows=with_rows
        )
    assert applied.rows == []
    assert applied.dead_lettered == {}
    assert (await aclient.get_job(row.id)).state == "running"


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        (
            "state = 'waiting_external', heartbeat_at = NULL, callback_id = gen_random_uuid(),"
            " callback_timeout_at = now() - interval '1 second'",
            "callback_timeout",
        ),
        ("heartbeat_at = now() - interval '1 hour'", "max_attempts_exhausted"),
    ],
)
async def test_rescue_on_the_last_attempt_dead_letters_in_its_transaction(
    aclient: wai.AsyncClient, setup: str, reason: str
) -> None:
    await dlq_on(aclient)
    row = await aclient.insert(Work(), queue="q", max_attempts=1)
    await claim(aclient)
    await fetch(aclient, "UPDATE wai.jobs SET " + setup + " WHERE id = %s", (row.id,))  # type: ignore[operator]
    result = await Rescuer(aclient.pool, aclient.schema, interval=60, staleness=30).run_once()
    assert sum(result.rescued.values()) == 1
    entry = await aclient.get_dlq_entry(row.id)
    assert entry.reason == reason
    assert entry.job.state == "failed"
    # the Rescued outbox row was written in the same transaction, from the row itself
    [(outcome,)] = await fetch(
        aclient, "SELECT outcome FROM wai.outbox WHERE job_id = %s", (row.id,)
    )
    assert outcome == "rescued"


async def test_rescue_with_attempts_left_does_not_dead_letter(aclient: wai.AsyncClient) -> None:
    await dlq_on(aclient)
    row = await aclient.insert(Work(), queue="q", max_attempts=3)
    await claim(aclient)
    await fetch(
        aclient,
        "UPDATE wai.jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
        (row.id,),
    )
    await Rescuer(aclient.pool, aclient.schema, interval=60, staleness=30).run_once()
    assert (await aclient.get_job(row.id)).state == "retryable"
    assert await aclient.dlq_depth() == 0


async def with_callback(
    client: wai.AsyncClient, claimed: wai.JobRow, *, park: bool = False
) -> uuid.UUID:
    """Register a callback for the attempt ``claimed`` (and park on it): its id."""
    cid = uuid.uuid4()
    async with client._connection() as conn:
        await callback_db.job_callback_register(
            conn,
            client.schema,
            job_id=claimed.id,
            run_lease=claimed.run_lease,
            callback_id=cid,
            timeout=60,
            expressions=CallbackExpressions(),
        )
        if park:
            await callback_db.job_callback_park_in_place(
                conn, client.schema, job_id=claimed.id, run_lease=claimed.run_lease, callback_id=cid
            )
    return cid


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_fail_external_dead_letters_a_job_of_a_dlq_queue(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    await dlq_on(aclient)
    row = await aclient.insert(Work(), queue="q")
    claimed = await claim(aclient)
    cid = await with_callback(aclient, claimed)
    if flavor == "async":
        failed = await aclient.fail_external(cid, "declined")
    else:
        failed = await asyncio.to_thread(sclient.fail_external, cid, "declined")
    assert failed.state == "failed"
    entry = await aclient.get_dlq_entry(row.id)
    assert entry.reason == "terminal_error"
    assert entry.job.errors[-1]["error"] == "declined"
    # the outcome's outbox row (no spec in this process) was left before the move
    assert await fetch(aclient, "SELECT outcome FROM wai.outbox WHERE job_id = %s", (row.id,)) == [
        ("exhausted",)
    ]


async def test_retry_external_on_the_last_attempt_dead_letters_as_exhausted(
    aclient: wai.AsyncClient,
) -> None:
    await dlq_on(aclient)
    row = await aclient.insert(Work(), queue="q", max_attempts=1)
    claimed = await claim(aclient)
    cid = await with_callback(aclient, claimed, park=True)
    failed = await aclient.retry_external(cid)
    assert failed.state == "failed"
    entry = await aclient.get_dlq_entry(row.id)
    assert entry.reason == "max_attempts_exhausted"  # not a terminal error: out of attempts


# -- list, get, depth -------------------------------------------------------------------


async def test_list_filters_and_pages_newest_first(aclient: wai.AsyncClient, admin: Admin) -> None:
    a = await dead(aclient, queue="q", tags=("red",))
    b = await dead(aclient, queue="other", tags=("blue",))
    c = await dead(aclient, queue="q", tags=("blue",))
    listed = await admin("list_dlq")
    assert [e.job.id for e in listed] == [c.id, b.id, a.id]
    assert all(e.reason == "manual" for e in listed)
    assert [e.job.id for e in await admin("list_dlq", queue="q")] == [c.id, a.id]
    assert [e.job.id for e in await admin("list_dlq", tag="blue")] == [c.id, b.id]
    assert [e.job.id for e in await admin("list_dlq", kind="nope")] == []
    assert [e.job.id for e in await admin("list_dlq", reason="manual", queue="other")] == [b.id]
    first = await admin("list_dlq", limit=2)
    rest = await admin("list_dlq", limit=2, before=first[-1].cursor)
    assert [e.job.id for e in first + rest] == [c.id, b.id, a.id]
    assert await admin("list_dlq", before=rest[-1].cursor) == []
    assert await admin("dlq_depth") == 3
    assert await admin("dlq_depth", "q") == 2
    assert await admin("dlq_depth", "none") == 0
    assert await admin("dlq_depths") == {"other": 1, "q": 2}
    assert await admin("count_dlq", tag="blue") == 2


async def test_get_keeps_the_whole_row(aclient: wai.AsyncClient, admin: Admin) -> None:
    before = await failed_job(aclient, tags=("t",), metadata={"m": 1}, priority=3)
    await aclient.move_to_dlq(before.id, reason="poison")
    entry = await admin("get_dlq_entry", before.id)
    assert entry.reason == "poison"
    assert entry.dlq_at <= await db_now(aclient)
    assert entry.job == before  # every column survives the trip through jsonb
    with pytest.raises(wai.JobNotFound, match="not in the dead-letter queue"):
        await admin("get_dlq_entry", before.id + 1000)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"limit": 0}, "limit must be"),
        ({"limit": True}, "limit must be"),
        ({"before": "yesterday"}, "invalid dead-letter cursor"),
        ({"before": "2026-01-01T00:00:00/x"}, "invalid dead-letter cursor"),
        ({"before": "2026-01-01T00:00:00/1"}, "invalid dead-letter cursor"),  # naive
        ({"queue": "bad queue"}, "invalid queue name"),
        ({"kind": ""}, "kind filter"),
        ({"tag": "x" * 201}, "tag filter"),
    ],
)
async def test_list_rejects_hostile_parameters(
    admin: Admin, kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(wai.ValidationError, match=match):
        await admin("list_dlq", **kwargs)


# -- retry ------------------------------------------------------------------------------


async def test_retry_restores_the_job_with_its_history(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    before = await dead(aclient, tags=("t",), metadata={"m": 1})
    row = await admin("retry_from_dlq", before.id)
    assert row.id == before.id
    assert row.state == "available"
    assert row.attempt == 0
    assert row.run_lease == before.run_lease  # the next claim starts lease 4
    assert (row.errors, row.metadata, row.tags) == (before.errors, before.metadata, before.tags)
    assert row.finalized_at is None
    assert row.created_at == before.created_at
    assert await aclient.dlq_depth() == 0
    assert await aclient.get_job(before.id) == row
    with pytest.raises(wai.JobNotFound):
        await admin("retry_from_dlq", before.id)


async def test_retry_to_another_queue_priority_and_time(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    before = await dead(aclient)
    later = await db_now(aclient) + timedelta(hours=1)
    row = await admin("retry_from_dlq", before.id, queue="elsewhere", priority=1, run_at=later)
    assert (row.queue, row.priority, row.state, row.run_at) == ("elsewhere", 1, "scheduled", later)


async def test_retry_of_a_unique_job_whose_key_is_held_keeps_the_entry(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    unique = wai.UniqueOpts(states=("available", "failed"))
    first = await aclient.insert(Work(n=5), queue="q", unique=unique)
    await fetch(
        aclient,
        "UPDATE wai.jobs SET state = 'failed', finalized_at = now() WHERE id = %s",
        (first.id,),
    )
    await aclient.move_to_dlq(first.id)
    second = await aclient.insert(Work(n=5), queue="q", unique=unique)  # the key is free again
    with pytest.raises(wai.UniqueConflict, match="stays in the dead-letter queue"):
        await admin("retry_from_dlq", first.id)
    assert (await aclient.get_dlq_entry(first.id)).job.id == first.id
    assert (await aclient.get_job(second.id)).state == "available"
    # bulk retry skips it and still terminates
    assert await admin("bulk_retry_from_dlq", all=True, batch_size=1) == 0
    assert await aclient.dlq_depth() == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"queue": "no spaces"}, "invalid queue name"),
        ({"priority": 0}, "priority must be"),
        ({"priority": 5}, "priority must be"),
        ({"run_at": "soon"}, "run_at must be"),
    ],
)
async def test_retry_rejects_bad_targets_and_keeps_the_entry(
    aclient: wai.AsyncClient, admin: Admin, kwargs: dict[str, Any], match: str
) -> None:
    before = await dead(aclient)
    with pytest.raises(wai.ValidationError, match=match):
        await admin("retry_from_dlq", before.id, **kwargs)
    assert await aclient.dlq_depth() == 1


async def test_bulk_retry_by_filter_reports_progress(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    keep = await dead(aclient, queue="other")
    ids = [(await dead(aclient, queue="q")).id for _ in range(5)]
    seen: list[int] = []
    done = await admin(
        "bulk_retry_from_dlq", queue="q", to_queue="again", batch_size=2, on_progress=seen.append
    )
    assert done == 5
    assert seen == [2, 4, 5]
    rows = await fetch(aclient, "SELECT id, queue, state::text FROM wai.jobs ORDER BY id")
    assert rows == [(i, "again", "available") for i in ids]
    assert [e.job.id for e in await aclient.list_dlq()] == [keep.id]


async def test_bulk_actions_refuse_to_run_without_a_filter(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    await dead(aclient)
    await failed_job(aclient)
    for method in ("bulk_retry_from_dlq", "purge_dlq", "bulk_move_to_dlq"):
        with pytest.raises(wai.ValidationError, match="without a filter"):
            await admin(method)
    assert await aclient.dlq_depth() == 1
    assert await count(aclient, "state = 'failed'") == 1


# -- the retried job runs again ---------------------------------------------------------


async def test_a_job_retried_from_the_dlq_runs_again_and_fires_new_followups(
    aclient: wai.AsyncClient,
) -> None:
    outcomes = iter(["fail", "fail", "ok"])

    @aclient.task(Work, queue="q")
    async def handler(job: wai.Job[Work]) -> None:
        if next(outcomes) == "fail":
            raise wai.TerminalError("not yet")

    aclient.on_exhausted_enqueue(Work, lambda args, job, err, n: Failed(of=job.run_lease))
    aclient.on_completed_enqueue(Work, lambda args, job: Done(of=job.run_lease))
    row = await aclient.insert(Work())

    async def failures(n: int) -> bool:
        return await count(aclient, "kind = 'failed'") == n and await aclient.dlq_depth() == 1

    async with serving(aclient, {"q": wai.QueueConfig(dlq=True)}):
        await wait_for(lambda: failures(1), what="first failure dead-lettered")
        await aclient.retry_from_dlq(row.id)
        await wait_for(lambda: failures(2), what="second failure dead-lettered")
        await aclient.retry_from_dlq(row.id)
        await wait_for(
            lambda: count(aclient, "id = %s AND state = 'completed'", (row.id,)),
            what="the job completed",
        )
        await wait_for(lambda: count(aclient, "kind = 'done'"), what="its follow-up")
    followups = await fetch(
        aclient,
        "SELECT kind, args, trigger_run_lease, trigger_outcome FROM wai.jobs"
        " WHERE trigger_job_id = %s ORDER BY id",
        (row.id,),
    )
    assert followups == [
        ("failed", {"of": 1}, 1, "exhausted"),
        ("failed", {"of": 2}, 2, "exhausted"),
        ("done", {"of": 3}, 3, "completed"),
    ]
    final = await aclient.get_job(row.id)
    assert (final.run_lease, final.attempt) == (3, 1)
    assert [e["error"].splitlines()[0] for e in final.errors] == ["TerminalError: not yet"] * 2


# -- move -------------------------------------------------------------------------------


async def test_move_one_failed_job(aclient: wai.AsyncClient, admin: Admin) -> None:
    row = await failed_job(aclient)
    entry = await admin("move_to_dlq", row.id, "poison pill")
    assert (entry.job, entry.reason) == (row, "poison pill")
    assert await count(aclient, "id = %s", (row.id,)) == 0
    with pytest.raises(wai.JobNotFound):
        await admin("move_to_dlq", row.id)


@pytest.mark.parametrize("state", ["available", "completed", "cancelled"])
async def test_move_refuses_a_job_that_is_not_failed(
    aclient: wai.AsyncClient, admin: Admin, state: str
) -> None:
    row = await aclient.insert(Work(), queue="q")
    await fetch(aclient, "UPDATE wai.jobs SET state = %s WHERE id = %s", (state, row.id))
    with pytest.raises(
        wai.InvalidStateError, match=f"it is {state}; only failed jobs can be moved"
    ):
        await admin("move_to_dlq", row.id)
    assert (await aclient.get_job(row.id)).state == state
    assert await aclient.dlq_depth() == 0


@pytest.mark.parametrize("reason", ["", "x" * 201, 7])
async def test_move_rejects_a_bad_reason(
    aclient: wai.AsyncClient, admin: Admin, reason: Any
) -> None:
    row = await failed_job(aclient)
    with pytest.raises(wai.ValidationError, match="reason"):
        await admin("move_to_dlq", row.id, reason)
    assert (await aclient.get_job(row.id)).state == "failed"


async def test_bulk_move_by_filter(aclient: wai.AsyncClient, admin: Admin) -> None:
    red = [(await failed_job(aclient, tags=("red",))).id for _ in range(3)]
    other = await failed_job(aclient, tags=("blue",))
    live = await aclient.insert(Work(), queue="q", tags=["red"])
    seen: list[int] = []
    moved = await admin("bulk_move_to_dlq", tag="red", batch_size=2, on_progress=seen.append)
    assert moved == 3
    assert seen == [2, 3]
    assert sorted(e.job.id for e in await aclient.list_dlq()) == red
    assert (await aclient.get_job(other.id)).state == "failed"
    assert (await aclient.get_job(live.id)).state == "available"
    assert await admin("bulk_move_to_dlq", all=True) == 1


# -- purge and retention ----------------------------------------------------------------


async def test_purge_one_and_by_filter(aclient: wai.AsyncClient, admin: Admin) -> None:
    a = await dead(aclient, queue="q")
    b = await dead(aclient, queue="q")
    c = await dead(aclient, queue="other")
    await admin("purge_dlq_entry", a.id)
    with pytest.raises(wai.JobNotFound):
        await admin("purge_dlq_entry", a.id)
    assert await admin("purge_dlq", queue="q") == 1
    assert [e.job.id for e in await aclient.list_dlq()] == [c.id]
    assert b.id not in {r[0] for r in await fetch(aclient, "SELECT job_id FROM wai.dlq")}
    assert await admin("purge_dlq", all=True) == 1
    assert await aclient.dlq_depth() == 0


async def test_purge_without_a_filter_deletes_nothing(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    for _ in range(3):
        await dead(aclient)
    with pytest.raises(wai.ValidationError, match="pass all=True"):
        await admin("purge_dlq")
    assert await aclient.dlq_depth() == 3


async def test_retention_deletes_old_entries_by_queue_override(aclient: wai.AsyncClient) -> None:
    old = await dead(aclient, queue="q")
    young = await dead(aclient, queue="q")
    short = await dead(aclient, queue="short")
    await fetch(
        aclient,
        "UPDATE wai.dlq SET dlq_at = now() - interval '2 days' WHERE job_id = %s",
        (old.id,),
    )
    await fetch(
        aclient,
        "UPDATE wai.dlq SET dlq_at = now() - interval '2 hours' WHERE job_id = %s",
        (short.id,),
    )
    await fetch(
        aclient,
        "INSERT INTO wai.queues (name, dlq_retention) VALUES ('short', interval '1 hour')",
    )
    cleaner = Cleaner(
        aclient.pool,
        aclient.schema,
        interval=60,
        completed=1e6,
        failed=1e6,
        cancelled=1e6,
        dlq=24 * 3600,
    )
    result = await cleaner.run_once()
    assert result.dlq == 2
    assert [e.job.id for e in await aclient.list_dlq()] == [young.id]


async def test_queue_config_validates_dlq_settings() -> None:
    with pytest.raises(wai.ValidationError, match="dlq must be"):
        wai.QueueConfig(dlq="yes")  # type: ignore[arg-type]
    with pytest.raises(wai.ValidationError, match="dlq_retention"):
        wai.QueueConfig(dlq_retention=0)


async def test_a_failing_move_rolls_back_the_failure_and_its_followups(
    aclient: wai.AsyncClient,
) -> None:
    # The move runs in the failure's transaction: when it cannot be written, neither is
    # the failure nor its Exhausted follow-up, and the attempt stays running (for rescue).
    aclient.on_exhausted_enqueue(Work, lambda args, job, error, attempt: Failed(of=job.id))
    await dlq_on(aclient)
    await fetch(
        aclient,
        "CREATE FUNCTION wai.refuse() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'dlq unavailable'; END $$;"
        " CREATE TRIGGER refuse BEFORE INSERT ON wai.dlq"
        " FOR EACH ROW EXECUTE FUNCTION wai.refuse()",
    )
    row = await aclient.insert(Work(), queue="q", max_attempts=1)
    claimed = await claim(aclient)
    fail = Outcome(
        job_id=row.id,
        run_lease=claimed.run_lease,
        state=wai.JobState.FAILED,
        event="exhausted",
        error="x",
        terminal=True,
    )
    async with aclient._connection() as conn:
        with pytest.raises(psycopg.errors.RaiseException, match="dlq unavailable"):
            await apply_outcomes(conn, aclient.schema, aclient.registry, [fail])
    assert (await aclient.get_job(row.id)).state == "running"
    assert await count(aclient, "kind = 'failed'") == 0
    assert await aclient.dlq_depth() == 0
