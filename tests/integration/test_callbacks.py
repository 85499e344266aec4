"""External callback resolution: every transition, races, follow-ups, CEL, hostile ids, rescue.

Jobs are parked directly through the database seam (claim, register, park), so these
tests need no worker; the handler side lives in ``test_callbacks_worker.py``.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest

import wai
from tests.integration._helpers import count, db_now, fetch
from wai._job import JobState
from wai._outcomes import Outcome
from wai.callbacks import CallbackExpressions, compile_expressions
from wai.callbacks import _queries_async as callback_db
from wai.maintenance import OutboxSweeper, Rescuer
from wai.transitions._finalize import apply_outcomes
from wai.worker import _queries as worker_db


@dataclass
class Pay:
    order: int


@dataclass
class Receipt:
    order: int


FLAVORS = ("async", "sync")


async def claimed(
    client: wai.AsyncClient,
    *,
    expressions: CallbackExpressions | None = None,
    timeout: float = 3600,
    max_attempts: int = 25,
) -> tuple[wai.JobRow, uuid.UUID]:
    """A running attempt of a fresh Pay job with a registered callback."""
    await client.insert(Pay(order=7), queue="q", max_attempts=max_attempts)
    cid = uuid.uuid4()
    async with client._connection() as conn:
        [row] = await worker_db.job_claim(
            conn, client.schema, queue="q", limit=1, deadlines={}, default_deadline=None
        )
        registered = await callback_db.job_callback_register(
            conn,
            client.schema,
            job_id=row.id,
            run_lease=row.run_lease,
            callback_id=cid,
            timeout=timeout,
            expressions=expressions or CallbackExpressions(),
        )
    assert registered is not None
    return await client.get_job(row.id), cid


async def parked(
    client: wai.AsyncClient,
    *,
    expressions: CallbackExpressions | None = None,
    timeout: float = 3600,
    max_attempts: int = 25,
) -> tuple[wai.JobRow, uuid.UUID]:
    """A Pay job parked in waiting_external on a fresh callback (as WaitForCallback does)."""
    row, cid = await claimed(
        client, expressions=expressions, timeout=timeout, max_attempts=max_attempts
    )
    park = Outcome(
        job_id=row.id,
        run_lease=row.run_lease,
        state=JobState.WAITING_EXTERNAL,
        event="waiting_for_callback",
        callback_id=cid,
    )
    async with client._connection() as conn:
        applied = await apply_outcomes(conn, client.schema, client.registry, [park])
    [after] = applied.rows
    assert after.state == "waiting_external"
    return after, cid


async def waiting_in_place(client: wai.AsyncClient) -> tuple[wai.JobRow, uuid.UUID]:
    """A Pay job whose handler waits in place on a fresh callback (job.wait_for_callback)."""
    row, cid = await claimed(client)
    async with client._connection() as conn:
        waiting = await callback_db.job_callback_park_in_place(
            conn, client.schema, job_id=row.id, run_lease=row.run_lease, callback_id=cid
        )
    assert waiting is not None
    assert waiting.heartbeat_at is not None
    return waiting, cid


async def call(
    flavor: str, aclient: wai.AsyncClient, sclient: wai.Client, method: str, *args: Any
) -> Any:
    """Call ``method`` on the async client, or on the sync one in a thread."""
    if flavor == "async":
        return await getattr(aclient, method)(*args)
    return await asyncio.to_thread(getattr(sclient, method), *args)


async def outbox(client: wai.AsyncClient) -> list[tuple[Any, ...]]:
    return await fetch(client, "SELECT job_id, run_lease, outcome, detail FROM wai.outbox")


async def followups_of(client: wai.AsyncClient, job_id: int) -> list[wai.JobRow]:
    return await client.list_jobs(trigger_job_id=job_id)


# -- transitions ------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_complete_external_completes_a_parked_job(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    row, cid = await parked(aclient)
    done = await call(flavor, aclient, sclient, "complete_external", cid, {"paid": 12})
    assert done.id == row.id
    assert done.state == "completed"
    assert done.finalized_at is not None
    assert (done.callback_id, done.callback_timeout_at) == (None, None)
    assert done.callback_result == {"paid": 12}
    assert done.run_lease == row.run_lease
    assert await aclient.get_job(row.id) == done
    with pytest.raises(wai.CallbackNotFound, match="already"):
        await call(flavor, aclient, sclient, "complete_external", cid)


async def test_complete_external_takes_a_string_id_and_no_payload(
    aclient: wai.AsyncClient,
) -> None:
    _row, cid = await parked(aclient)
    done = await aclient.complete_external(str(cid))
    assert (done.state, done.callback_result) == ("completed", None)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_complete_external_absorbs_the_race_with_the_park(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    row, cid = await claimed(aclient)
    assert row.state == "running"
    done = await call(flavor, aclient, sclient, "complete_external", cid, "ok")
    assert done.state == "completed"
    # The handler's late park finds nothing to match: fenced.
    park = Outcome(
        job_id=row.id,
        run_lease=row.run_lease,
        state=JobState.WAITING_EXTERNAL,
        event="waiting_for_callback",
        callback_id=cid,
    )
    async with aclient._connection() as conn:
        applied = await apply_outcomes(conn, aclient.schema, aclient.registry, [park])
    assert applied.rows == []
    assert (await aclient.get_job(row.id)).state == "completed"


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_fail_external_is_terminal_whatever_attempts_remain(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    _row, cid = await parked(aclient, max_attempts=25)
    failed = await call(flavor, aclient, sclient, "fail_external", cid, "card declined")
    assert failed.state == "failed"
    assert failed.finalized_at is not None
    assert failed.callback_id is None
    last = failed.errors[-1]
    assert (last["error"], last["terminal"], last["attempt"]) == ("card declined", True, 1)
    with pytest.raises(wai.CallbackNotFound):
        await call(flavor, aclient, sclient, "fail_external", cid, "again")


async def test_fail_external_needs_a_string_error(aclient: wai.AsyncClient) -> None:
    row, cid = await parked(aclient)
    with pytest.raises(wai.ValidationError, match="error must be a string"):
        await aclient.fail_external(cid, 42)  # type: ignore[arg-type]
    assert (await aclient.get_job(row.id)).state == "waiting_external"


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_retry_external_makes_the_job_available_keeping_its_attempts(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    row, cid = await parked(aclient)
    before = await db_now(aclient)
    retried = await call(flavor, aclient, sclient, "retry_external", cid)
    assert retried.state == "available"
    assert retried.attempt == row.attempt == 1  # the next claim makes it attempt 2
    assert retried.run_at <= await db_now(aclient)
    assert retried.run_at >= before - timedelta(seconds=1)
    assert (retried.callback_id, retried.heartbeat_at, retried.finalized_at) == (None, None, None)
    assert retried.errors[-1]["error"] == "retry requested by external callback"
    with pytest.raises(wai.CallbackNotFound):
        await call(flavor, aclient, sclient, "retry_external", cid)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_retry_external_cannot_loop_a_job_past_max_attempts(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    errors: list[tuple[str, int]] = []
    for client in (aclient, sclient):
        client.registry.add_spec(
            Pay,
            "exhausted",
            lambda a, j, e, n: errors.append((e, n)) or Receipt(a.order),
            with_request=False,
        )
        client.registry.add_spec(Pay, "retried", lambda *a: Receipt(0), with_request=False)
    row, cid = await parked(aclient, max_attempts=2)
    await call(flavor, aclient, sclient, "retry_external", cid)  # attempt 1 of 2: retried
    async with aclient._connection() as conn:
        [again] = await worker_db.job_claim(
            conn, aclient.schema, queue="q", limit=1, deadlines={}, default_deadline=None
        )
        assert (again.id, again.attempt) == (row.id, 2)
        cid = uuid.uuid4()
        await callback_db.job_callback_register(
            conn,
            aclient.schema,
            job_id=row.id,
            run_lease=again.run_lease,
            callback_id=cid,
            timeout=60,
            expressions=CallbackExpressions(),
        )
        await callback_db.job_callback_park_in_place(  # any park will do; heartbeat does not matter
            conn, aclient.schema, job_id=row.id, run_lease=again.run_lease, callback_id=cid
        )
    exhausted = await call(flavor, aclient, sclient, "retry_external", cid)
    assert exhausted.state == "failed"
    assert exhausted.finalized_at is not None
    message = "retry requested by external callback, but no attempt is left (attempt 2 of 2)"
    assert exhausted.errors[-1]["error"] == message
    assert errors == [(message, 2)]
    outcomes = sorted(f.trigger.outcome for f in await followups_of(aclient, row.id) if f.trigger)
    assert outcomes == ["exhausted", "retried"]
    with pytest.raises(wai.CallbackNotFound):
        await call(flavor, aclient, sclient, "retry_external", cid)


async def test_retry_external_does_not_apply_to_a_running_job(aclient: wai.AsyncClient) -> None:
    row, cid = await claimed(aclient)
    with pytest.raises(wai.CallbackNotFound, match="retry applies to a waiting_external job"):
        await aclient.retry_external(cid)
    after = await aclient.get_job(row.id)
    assert (after.state, after.callback_id) == ("running", cid)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_resume_external_hands_the_payload_back_to_running(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    row, cid = await waiting_in_place(aclient)
    resumed = await call(flavor, aclient, sclient, "resume_external", cid, [1, "two"])
    assert resumed.state == "running"
    assert resumed.heartbeat_at is not None
    assert (resumed.callback_id, resumed.callback_timeout_at) == (None, None)
    assert resumed.callback_result == [1, "two"]
    assert (resumed.attempt, resumed.run_lease) == (row.attempt, row.run_lease)
    with pytest.raises(wai.CallbackNotFound):
        await call(flavor, aclient, sclient, "resume_external", cid)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_resume_external_of_a_parked_job_is_refused_and_changes_nothing(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    row, cid = await parked(aclient)  # WaitForCallback: no handler left to take a payload
    with pytest.raises(wai.InvalidStateError, match="complete_external") as err:
        await call(flavor, aclient, sclient, "resume_external", cid, {"x": 1})
    assert f"job {row.id} was parked by returning WaitForCallback" in str(err.value)
    assert err.value.state == "waiting_external"
    assert await aclient.get_job(row.id) == row  # not an ownerless running row
    done = await call(flavor, aclient, sclient, "complete_external", cid, {"x": 1})
    assert (done.state, done.callback_result) == ("completed", {"x": 1})


async def test_resume_external_with_no_payload_still_leaves_a_result(
    aclient: wai.AsyncClient,
) -> None:
    row, cid = await claimed(aclient)
    await aclient.resume_external(cid)
    rows = await fetch(
        aclient, "SELECT callback_result IS NOT NULL FROM wai.jobs WHERE id = %s", (row.id,)
    )
    assert rows == [(True,)]  # JSON null: the waiting handler sees "resumed with None"


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_heartbeat_callback_extends_the_timeout(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    row, cid = await parked(aclient, timeout=60)
    assert row.callback_timeout_at is not None
    beat = await call(flavor, aclient, sclient, "heartbeat_callback", cid, 7200)
    assert beat.state == "waiting_external"
    assert beat.callback_id == cid
    assert beat.callback_timeout_at is not None
    assert beat.callback_timeout_at - row.callback_timeout_at > timedelta(seconds=7000)
    for bad in (0, -1, float("nan"), "60", True):
        with pytest.raises(wai.ValidationError, match="timeout"):
            await call(flavor, aclient, sclient, "heartbeat_callback", cid, bad)


async def test_a_payload_that_is_not_json_changes_nothing(aclient: wai.AsyncClient) -> None:
    row, cid = await parked(aclient)
    with pytest.raises(wai.SerializationError):
        await aclient.complete_external(cid, {"when": object()})
    with pytest.raises(wai.ValidationError, match="NUL"):
        await aclient.resume_external(cid, "nul \x00 byte")
    assert (await aclient.get_job(row.id)).state == "waiting_external"


HOSTILE_STRINGS = [
    "",
    "not-a-uuid",
    "'; DROP TABLE wai.jobs; --",
    "00000000-0000-0000-0000-00000000000g",
    "x" * 10_000,
    "\x00",
    "\ud800",
]


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_unknown_and_hostile_ids_are_not_found(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    row, cid = await parked(aclient)
    for bad in [uuid.uuid4(), str(uuid.uuid4()), *HOSTILE_STRINGS]:
        for method, extra in [
            ("complete_external", ()),
            ("fail_external", ("e",)),
            ("retry_external", ()),
            ("resume_external", ()),
            ("heartbeat_callback", (60,)),
            ("resolve_callback", ({}, "complete")),
        ]:
            with pytest.raises(wai.CallbackNotFound):
                await call(flavor, aclient, sclient, method, bad, *extra)
    for wrong_type in (123, None, b"bytes", 1.5, ["x"]):
        with pytest.raises(wai.ValidationError, match="callback id"):
            await call(flavor, aclient, sclient, "complete_external", wrong_type)
    after = await aclient.get_job(row.id)
    assert (after.state, after.callback_id) == ("waiting_external", cid)
    assert await count(aclient) == 1
    assert await outbox(aclient) == []


# -- races ------------------------------------------------------------------------------


async def test_racing_resolutions_apply_once(aclient: wai.AsyncClient, sclient: wai.Client) -> None:
    aclient.on_completed_enqueue(Pay, lambda args, job: Receipt(order=args.order), name="r")
    sclient.on_completed_enqueue(Pay, lambda args, job: Receipt(order=args.order), name="r")
    for _ in range(5):
        row, cid = await parked(aclient)
        thread_result: list[object] = []
        start = threading.Barrier(2)

        def from_thread(
            cid: uuid.UUID = cid, out: list[object] = thread_result, start: Any = start
        ) -> None:
            start.wait()
            try:
                out.append(sclient.complete_external(cid, "thread"))
            except wai.CallbackNotFound as exc:
                out.append(exc)

        thread = threading.Thread(target=from_thread)
        thread.start()
        await asyncio.to_thread(start.wait)
        results = await asyncio.gather(
            aclient.complete_external(cid, "a"),
            aclient.complete_external(cid, "b"),
            return_exceptions=True,
        )
        await asyncio.to_thread(thread.join)
        outcomes = [*results, *thread_result]
        won = [r for r in outcomes if isinstance(r, wai.JobRow)]
        lost = [r for r in outcomes if isinstance(r, wai.CallbackNotFound)]
        assert (len(won), len(lost)) == (1, 2), outcomes
        final = await aclient.get_job(row.id)
        assert final.state == "completed"
        assert final.callback_result == won[0].callback_result
        assert len(await followups_of(aclient, row.id)) == 1


async def test_a_resolution_racing_a_cel_resolution_applies_once(
    aclient: wai.AsyncClient,
) -> None:
    row, cid = await parked(aclient, expressions=compile_expressions(on_fail="payload.bad"))
    results = await asyncio.gather(
        aclient.resolve_callback(cid, {"bad": True}),
        aclient.complete_external(cid),
        return_exceptions=True,
    )
    assert sum(isinstance(r, wai.CallbackNotFound) for r in results) == 1
    assert (await aclient.get_job(row.id)).state in ("completed", "failed")


# -- follow-ups -------------------------------------------------------------------------

RESOLUTIONS = [
    ("complete_external", (), "completed", "completed"),
    ("fail_external", ("declined",), "exhausted", "failed"),
    ("retry_external", (), "retried", "available"),
]


@pytest.mark.parametrize(("method", "extra", "event", "state"), RESOLUTIONS)
@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_client_with_specs_enqueues_followups_in_the_resolution_transaction(
    aclient: wai.AsyncClient,
    sclient: wai.Client,
    flavor: str,
    method: str,
    extra: tuple[Any, ...],
    event: str,
    state: str,
) -> None:
    seen: list[tuple[Any, ...]] = []

    def spec(*a: Any) -> Receipt:
        seen.append(a)
        return Receipt(order=a[0].order)

    resolver = aclient if flavor == "async" else sclient
    resolver.registry.add_spec(Pay, event, spec, with_request=False, name="receipt")
    row, cid = await parked(aclient)
    after = await call(flavor, aclient, sclient, method, cid, *extra)
    assert after.state == state
    [follow] = await followups_of(aclient, row.id)
    assert follow.kind == "receipt"
    assert follow.args == {"order": 7}
    assert follow.trigger == wai.Trigger(
        job_id=row.id, run_lease=row.run_lease, outcome=event, spec="receipt"
    )
    assert seen[0][0] == Pay(order=7)
    assert seen[0][1].state == state
    if event == "exhausted":
        assert seen[0][2] == "declined"
    if event == "retried":
        assert seen[0][2] == "retry requested by external callback"
    assert await outbox(aclient) == []


@pytest.mark.parametrize(("method", "extra", "event", "state"), RESOLUTIONS)
async def test_a_client_without_specs_leaves_an_outbox_row_for_a_worker(
    aclient: wai.AsyncClient,
    sclient: wai.Client,
    method: str,
    extra: tuple[Any, ...],
    event: str,
    state: str,
) -> None:
    row, cid = await parked(aclient)
    after = await asyncio.to_thread(getattr(sclient, method), cid, *extra)  # no registry
    assert after.state == state
    [(job_id, lease, outcome, detail)] = await outbox(aclient)
    assert (job_id, lease, outcome) == (row.id, row.run_lease, event)
    if event == "exhausted":
        assert detail["error"] == "declined"
    assert await followups_of(aclient, row.id) == []
    # A worker that holds the spec dispatches it, exactly once.
    aclient.registry.add_spec(
        Pay, event, lambda *a: Receipt(order=a[0].order), with_request=False, name="receipt"
    )
    sweeper = OutboxSweeper(aclient.pool, aclient.schema, aclient.registry, interval=60)
    assert (await sweeper.run_once()).dispatched == 1
    assert (await sweeper.run_once()).dispatched == 0
    [follow] = await followups_of(aclient, row.id)
    assert follow.trigger is not None
    assert (follow.trigger.outcome, follow.trigger.run_lease) == (event, row.run_lease)
    assert await outbox(aclient) == []


async def test_resume_and_heartbeat_enqueue_nothing(aclient: wai.AsyncClient) -> None:
    for outcome in ("completed", "retried", "exhausted"):
        aclient.registry.add_spec(Pay, outcome, lambda *a: Receipt(1), with_request=False)
    row, cid = await waiting_in_place(aclient)
    await aclient.heartbeat_callback(cid, 60)
    await aclient.resume_external(cid, 1)
    assert await followups_of(aclient, row.id) == []
    assert await outbox(aclient) == []


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_failing_spec_rolls_the_resolution_back_and_a_retry_succeeds_once(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    broken = True

    def receipt(args: Pay, job: wai.JobRow) -> Receipt:
        if broken:
            raise RuntimeError("mail server down")
        return Receipt(order=args.order)

    resolver = aclient if flavor == "async" else sclient
    resolver.on_completed_enqueue(Pay, receipt, name="receipt")
    row, cid = await parked(aclient)
    with pytest.raises(wai.FollowUpError, match="mail server down"):
        await call(flavor, aclient, sclient, "complete_external", cid, {"paid": 1})
    after = await aclient.get_job(row.id)
    assert (after.state, after.callback_id, after.callback_result) == (
        "waiting_external",
        cid,
        None,
    )
    assert await followups_of(aclient, row.id) == []
    assert await outbox(aclient) == []

    broken = False  # the closure is fixed; the sender retries the same call
    done = await call(flavor, aclient, sclient, "complete_external", cid, {"paid": 1})
    assert done.state == "completed"
    assert len(await followups_of(aclient, row.id)) == 1
    with pytest.raises(wai.CallbackNotFound):
        await call(flavor, aclient, sclient, "complete_external", cid, {"paid": 1})
    assert len(await followups_of(aclient, row.id)) == 1


async def test_a_followup_insert_conflict_rolls_the_resolution_back(
    aclient: wai.AsyncClient,
) -> None:
    unique = wai.UniqueOpts(by_args=True)
    aclient.on_completed_enqueue_with(
        Pay, lambda args, job: wai.EnqueueRequest(Receipt(order=1), unique=unique)
    )
    await aclient.insert(Receipt(order=1), unique=unique)
    row, cid = await parked(aclient)
    with pytest.raises(wai.FollowUpError):
        await aclient.complete_external(cid)
    assert (await aclient.get_job(row.id)).callback_id == cid


# -- *_in_tx ----------------------------------------------------------------------------


async def test_in_tx_resolution_commits_with_the_callers_writes(aclient: wai.AsyncClient) -> None:
    row, cid = await parked(aclient)
    async with aclient.transaction() as tx:
        done = await aclient.complete_external_in_tx(tx, cid, "ok")
        await tx.insert(Receipt(order=1))
        assert done.state == "completed"
    assert (await aclient.get_job(row.id)).state == "completed"
    assert await count(aclient, "kind = 'receipt'") == 1


async def test_in_tx_resolution_rolls_back_with_the_caller(aclient: wai.AsyncClient) -> None:
    row, cid = await parked(aclient)

    async def fail_then_break() -> None:
        async with aclient.transaction() as tx:
            await aclient.fail_external_in_tx(tx, cid, "nope")
            raise RuntimeError("business rule")

    with pytest.raises(RuntimeError, match="business rule"):
        await fail_then_break()
    after = await aclient.get_job(row.id)
    assert (after.state, after.callback_id) == ("waiting_external", cid)
    assert await outbox(aclient) == []


async def test_every_in_tx_variant_works(aclient: wai.AsyncClient) -> None:
    _, cid = await parked(aclient)
    async with aclient.transaction() as tx:
        assert (await aclient.heartbeat_callback_in_tx(tx, cid, 60)).callback_id == cid
        assert (await aclient.retry_external_in_tx(tx, cid)).state == "available"
    _, cid = await waiting_in_place(aclient)
    async with aclient.transaction() as tx:
        assert (await aclient.resume_external_in_tx(tx, cid, 1)).state == "running"
    _, cid = await parked(aclient)
    async with aclient.transaction() as tx:
        res = await aclient.resolve_callback_in_tx(tx, cid, {}, "complete")
        assert res.action == "completed"


def test_sync_in_tx_resolution(sclient: wai.Client) -> None:
    row, cid = asyncio.run(_parked_on_fresh_client(sclient.database_url))

    def complete_then_break() -> None:
        with sclient.transaction() as tx:
            sclient.complete_external_in_tx(tx, cid)
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        complete_then_break()
    assert sclient.get_job(row.id).state == "waiting_external"
    with sclient.transaction() as tx:
        sclient.complete_external_in_tx(tx, cid, 5)
    assert sclient.get_job(row.id).callback_result == 5


async def _parked_on_fresh_client(url: str) -> tuple[wai.JobRow, uuid.UUID]:
    async with wai.AsyncClient(url) as client:
        return await parked(client)


# -- hooks ------------------------------------------------------------------------------


async def test_resolutions_fire_hooks_in_a_process_running_a_runtime(
    aclient: wai.AsyncClient,
) -> None:
    from tests.integration._helpers import serving, wait_for

    events: list[wai.events.JobEvent] = []
    aclient.on_event(Pay, events.append)
    async with serving(aclient, {"other": 1}):
        _, c1 = await parked(aclient)
        _, c2 = await parked(aclient)
        _, c3 = await parked(aclient)
        _, c4 = await waiting_in_place(aclient)
        await aclient.complete_external(c1, "x")
        await aclient.fail_external(c2, "boom")
        await aclient.retry_external(c3)
        await aclient.resume_external(c4)  # emits nothing
        await wait_for(lambda: len(events) >= 3)
        await asyncio.sleep(0.1)
    kinds = [type(e) for e in events]
    assert kinds == [wai.events.Completed, wai.events.Exhausted, wai.events.Retried]
    completed = events[0]
    assert isinstance(completed, wai.events.Completed)
    assert completed.duration == 0.0
    assert completed.args == Pay(order=7)
    exhausted = events[1]
    assert isinstance(exhausted, wai.events.Exhausted)
    assert exhausted.error == "boom"


# -- CEL --------------------------------------------------------------------------------


async def test_resolve_callback_filter_false_ignores_the_payload(
    aclient: wai.AsyncClient,
) -> None:
    exprs = compile_expressions(filter='payload.type == "payment"', on_complete="true")
    row, cid = await parked(aclient, expressions=exprs)
    res = await aclient.resolve_callback(cid, {"type": "ping"}, "complete")
    assert res.action == "ignored"
    after = await aclient.get_job(row.id)
    assert (after.state, after.callback_id) == ("waiting_external", cid)
    res = await aclient.resolve_callback(cid, {"type": "payment"})
    assert res.action == "completed"


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_resolve_callback_on_complete_with_transform(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    exprs = compile_expressions(
        on_complete='payload.status == "paid"',
        on_fail='payload.status == "declined"',
        transform='{"cents": payload.amount * 100, "ref": payload.ref}',
    )
    _row, cid = await parked(aclient, expressions=exprs)
    res = await call(
        flavor,
        aclient,
        sclient,
        "resolve_callback",
        cid,
        {"status": "paid", "amount": 12, "ref": "r1"},
    )
    assert res.action == "completed"
    assert res.payload == {"cents": 1200, "ref": "r1"}
    assert res.job.state == "completed"
    assert res.job.callback_result == {"cents": 1200, "ref": "r1"}


async def test_resolve_callback_on_fail_records_the_expression(aclient: wai.AsyncClient) -> None:
    exprs = compile_expressions(
        on_complete='payload.status == "paid"', on_fail='payload.status == "declined"'
    )
    _row, cid = await parked(aclient, expressions=exprs)
    res = await aclient.resolve_callback(cid, {"status": "declined"}, "complete")
    assert res.action == "failed"
    last = res.job.errors[-1]
    assert last["terminal"] is True
    assert last["expression"] == 'payload.status == "declined"'


@pytest.mark.parametrize(
    ("default", "action", "state"),
    [
        ("ignore", "ignored", "waiting_external"),
        ("complete", "completed", "completed"),
        ("fail", "failed", "failed"),
    ],
)
async def test_resolve_callback_default_action_when_nothing_matches(
    aclient: wai.AsyncClient, default: str, action: str, state: str
) -> None:
    exprs = compile_expressions(on_complete="payload.ok == true", on_fail="payload.ok == false")
    _row, cid = await parked(aclient, expressions=exprs)
    res = await aclient.resolve_callback(cid, {"other": 1}, default)  # both expressions err
    assert (res.action, res.job.state) == (action, state)


async def test_resolve_callback_without_expressions_uses_the_default(
    aclient: wai.AsyncClient,
) -> None:
    _row, cid = await parked(aclient)
    assert (await aclient.resolve_callback(cid, {"a": 1})).action == "ignored"
    res = await aclient.resolve_callback(cid, {"a": 1}, "complete")
    assert res.job.callback_result == {"a": 1}


async def test_resolve_callback_rejects_a_bad_default_action(aclient: wai.AsyncClient) -> None:
    _row, cid = await parked(aclient)
    with pytest.raises(wai.ValidationError, match="default_action"):
        await aclient.resolve_callback(cid, {}, "explode")


async def test_a_failing_transform_resolves_nothing(aclient: wai.AsyncClient) -> None:
    exprs = compile_expressions(on_complete="true", transform="payload.missing.field")
    row, cid = await parked(aclient, expressions=exprs)
    with pytest.raises(wai.ValidationError, match="transform"):
        await aclient.resolve_callback(cid, {"a": 1})
    assert (await aclient.get_job(row.id)).callback_id == cid


@pytest.mark.parametrize(
    ("field", "expression", "message"),
    [
        ("filter", "payload.(", "not valid CEL"),
        ("on_complete", "secret == 1", "may only use `payload`"),
        ("on_fail", "", "non-empty"),
        ("transform", "x" * 5000, "longer than"),
    ],
)
def test_invalid_cel_is_rejected_at_compile_time(field: str, expression: str, message: str) -> None:
    with pytest.raises(wai.ValidationError, match=message):
        compile_expressions(**{field: expression})


def test_cel_without_cel_python_says_to_install_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "celpy", None)
    with pytest.raises(wai.ValidationError, match=r"wai\[cel\]"):
        compile_expressions(filter="true")
    assert compile_expressions() == CallbackExpressions()  # no expression: no CEL needed


# -- rescue -----------------------------------------------------------------------------


async def expire(client: wai.AsyncClient, job_id: int) -> None:
    await fetch(
        client,
        "UPDATE wai.jobs SET callback_timeout_at = now() - interval '1 second' WHERE id = %s",
        (job_id,),
    )


async def test_callback_timeout_is_rescued_as_retryable_with_backoff(
    aclient: wai.AsyncClient,
) -> None:
    aclient.on_rescued_enqueue(Pay, lambda args, job, reason: Receipt(order=args.order))
    row, cid = await parked(aclient)
    await expire(aclient, row.id)
    result = await Rescuer(aclient.pool, aclient.schema, interval=60, staleness=30).run_once()
    assert result.rescued == {"callback_timeout": 1}
    after = await aclient.get_job(row.id)
    assert after.state == "retryable"
    assert after.run_at > await db_now(aclient)  # backoff
    assert after.callback_id is None
    assert after.errors[-1]["error"] == "callback timed out"
    with pytest.raises(wai.CallbackNotFound):
        await aclient.complete_external(cid)
    [(_, _, outcome, detail)] = await outbox(aclient)
    assert (outcome, detail) == ("rescued", {"reason": "callback_timeout"})
    sweeper = OutboxSweeper(aclient.pool, aclient.schema, aclient.registry, interval=60)
    assert (await sweeper.run_once()).dispatched == 1
    [follow] = await followups_of(aclient, row.id)
    assert follow.trigger is not None
    assert follow.trigger.outcome == "rescued"


async def test_callback_timeout_on_the_last_attempt_fails(aclient: wai.AsyncClient) -> None:
    row, _ = await parked(aclient, max_attempts=1)
    await expire(aclient, row.id)
    await Rescuer(aclient.pool, aclient.schema, interval=60, staleness=30).run_once()
    after = await aclient.get_job(row.id)
    assert after.state == "failed"
    assert after.finalized_at is not None
    assert [o[2] for o in await outbox(aclient)] == ["rescued"]


async def test_heartbeat_callback_keeps_a_parked_job_from_timing_out(
    aclient: wai.AsyncClient,
) -> None:
    row, cid = await parked(aclient, timeout=0.5)
    await asyncio.sleep(0.6)
    await aclient.heartbeat_callback(cid, 60)
    result = await Rescuer(aclient.pool, aclient.schema, interval=60, staleness=30).run_once()
    assert result.rescued == {}
    assert (await aclient.get_job(row.id)).state == "waiting_external"


async def test_a_dead_in_place_waiter_is_rescued_as_stale(aclient: wai.AsyncClient) -> None:
    row, cid = await claimed(aclient)
    async with aclient._connection() as conn:
        assert await callback_db.job_callback_park_in_place(
            conn, aclient.schema, job_id=row.id, run_lease=row.run_lease, callback_id=cid
        )
    await fetch(
        aclient,
        "UPDATE wai.jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
        (row.id,),
    )
    result = await Rescuer(aclient.pool, aclient.schema, interval=60, staleness=30).run_once()
    assert result.rescued == {"stale_heartbeat": 1}
    assert (await aclient.get_job(row.id)).state == "retryable"


async def test_a_parked_job_is_never_rescued_as_stale(aclient: wai.AsyncClient) -> None:
    row, _ = await parked(aclient)
    assert (row.heartbeat_at, row.deadline_at) == (None, None)
    result = await Rescuer(aclient.pool, aclient.schema, interval=60, staleness=0.01).run_once()
    assert result.rescued == {}
