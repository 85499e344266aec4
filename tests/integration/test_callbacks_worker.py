"""Callbacks from the handler's side: register, park, wait in place, races, shutdown."""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

import wai
from tests.integration._helpers import (
    FAST,
    attempts_settled,
    serving,
    wait_for,
    wait_gate,
    wait_job,
)


@dataclass
class Pay:
    order: int


@dataclass
class Receipt:
    order: int


@dataclass
class Watch:
    order: int


FLAVORS = ("async", "sync")


def parking_task(client: wai.AsyncClient, flavor: str, tokens: list[wai.CallbackToken]) -> None:
    """Pay's handler: register a callback, hand it out, park."""
    if flavor == "async":

        @client.task(Pay, queue="q")
        async def pay(job: wai.Job[Pay]) -> wai.WaitForCallback:
            token = await job.register_callback(timeout=60)
            tokens.append(token)
            return wai.WaitForCallback(token)

    else:

        @client.task(Pay, queue="q")
        def pay_sync(job: wai.Job[Pay]) -> wai.WaitForCallback:
            token = job.register_callback_sync(timeout=60)
            tokens.append(token)
            return wai.WaitForCallback(token)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_handler_parks_and_a_webhook_completes_it(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    tokens: list[wai.CallbackToken] = []
    parking_task(aclient, flavor, tokens)
    events: list[wai.events.JobEvent] = []
    aclient.on_event(Pay, events.append)
    aclient.on_waiting_for_callback_enqueue(Pay, lambda args, job: Watch(order=args.order))
    aclient.on_completed_enqueue(Pay, lambda args, job: Receipt(order=args.order))
    async with serving(aclient, {"q": 1}, outbox_interval=0.05):
        first = await aclient.insert(Pay(order=1))
        parked = await wait_job(aclient, first.id, "waiting_external")
        [token] = tokens
        assert token.id == parked.callback_id
        assert (token.job_id, token.run_lease) == (first.id, parked.run_lease)
        assert (parked.heartbeat_at, parked.deadline_at) == (None, None)
        assert parked.callback_timeout_at is not None
        # The slot is free: with concurrency 1 a second job runs (and parks) too.
        second = await aclient.insert(Pay(order=2))
        await wait_job(aclient, second.id, "waiting_external")
        # The payment gateway's webhook, in a web process with the sync client.
        done = await asyncio.to_thread(sclient.complete_external, str(token.id), {"ok": 1})
        assert done.state == "completed"
        await wait_for(lambda: any(isinstance(e, wai.events.WaitingForCallback) for e in events))

        async def followups() -> list[str]:
            rows = await aclient.list_jobs(trigger_job_id=first.id)
            return sorted(j.kind for j in rows) if len(rows) == 2 else []

        # The sync client holds no spec: its outbox row is dispatched by the worker.
        assert await wait_for(followups) == ["receipt", "watch"]
    assert [type(e) for e in events if e.job.id == first.id][:2] == [
        wai.events.Started,
        wai.events.WaitingForCallback,
    ]


async def test_the_outbox_row_of_a_resolution_without_registry_is_dispatched_by_the_worker(
    aclient: wai.AsyncClient, sclient: wai.Client
) -> None:
    tokens: list[wai.CallbackToken] = []
    parking_task(aclient, "async", tokens)
    aclient.on_completed_enqueue(Pay, lambda args, job: Receipt(order=args.order))
    async with serving(aclient, {"q": 1}, outbox_interval=0.05):
        job = await aclient.insert(Pay(order=3))
        await wait_job(aclient, job.id, "waiting_external")
        await asyncio.to_thread(sclient.complete_external, tokens[0].id)

        async def receipt() -> list[wai.JobRow]:
            return await aclient.list_jobs(trigger_job_id=job.id, kind="receipt")

        [follow] = await wait_for(receipt)
        assert follow.args == {"order": 3}


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_wait_for_callback_without_a_registered_callback_fails(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    def result(job: wai.Job[Any]) -> wai.WaitForCallback:
        token = wai.CallbackToken(id=uuid.uuid4(), job_id=job.id, run_lease=job.run_lease)
        return wai.WaitForCallback(token)

    if flavor == "async":

        @aclient.task(Pay, queue="q")
        async def pay(job: wai.Job[Pay]) -> wai.WaitForCallback:
            return result(job)

    else:

        @aclient.task(Pay, queue="q")
        def pay_sync(job: wai.Job[Pay]) -> wai.WaitForCallback:
            return result(job)

    async with serving(aclient):
        job = await aclient.insert(Pay(order=1))
        failed = await wait_job(aclient, job.id, "failed")
    assert "without a registered callback" in failed.errors[-1]["error"]
    assert failed.errors[-1]["terminal"] is True


async def test_wait_for_callback_with_another_jobs_token_fails(aclient: wai.AsyncClient) -> None:
    @aclient.task(Pay, queue="q")
    async def pay(job: wai.Job[Pay]) -> wai.WaitForCallback:
        mine = await job.register_callback()
        return wai.WaitForCallback(
            wai.CallbackToken(id=mine.id, job_id=job.id + 1000, run_lease=job.run_lease)
        )

    async with serving(aclient):
        job = await aclient.insert(Pay(order=1))
        failed = await wait_job(aclient, job.id, "failed")
    assert f"token of job {job.id + 1000}" in failed.errors[-1]["error"]
    assert failed.callback_id is None


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_resolution_before_the_park_commits_fences_the_park(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    tokens: list[wai.CallbackToken] = []
    gate = threading.Event()
    if flavor == "async":

        @aclient.task(Pay, queue="q")
        async def pay(job: wai.Job[Pay]) -> wai.WaitForCallback:
            token = await job.register_callback()
            tokens.append(token)  # handed out before the park: the gateway answers at once
            await wait_gate(gate)
            return wai.WaitForCallback(token)

    else:

        @aclient.task(Pay, queue="q")
        def pay_sync(job: wai.Job[Pay]) -> wai.WaitForCallback:
            token = job.register_callback_sync()
            tokens.append(token)
            gate.wait(10)
            return wai.WaitForCallback(token)

    events: list[wai.events.JobEvent] = []
    aclient.on_event(Pay, events.append)
    aclient.on_waiting_for_callback_enqueue(Pay, lambda args, job: Watch(order=args.order))
    async with serving(aclient):
        job = await aclient.insert(Pay(order=1))
        await wait_for(lambda: tokens)
        done = await aclient.complete_external(tokens[0].id, "early")
        assert done.state == "completed"
        gate.set()
        await wait_for(lambda: attempts_settled(aclient))
        await asyncio.sleep(0.2)
    final = await aclient.get_job(job.id)
    assert (final.state, final.callback_result, final.errors) == ("completed", "early", ())
    assert not any(isinstance(e, wai.events.WaitingForCallback) for e in events)
    assert await aclient.list_jobs(trigger_job_id=job.id, kind="watch") == []


async def test_register_callback_of_a_stale_attempt_raises(aclient: wai.AsyncClient) -> None:
    started = threading.Event()
    gate = threading.Event()
    seen: list[BaseException] = []

    @aclient.task(Pay, queue="q")
    async def pay(job: wai.Job[Pay]) -> None:
        started.set()
        await wait_gate(gate)
        try:
            await job.register_callback()
        except wai.StaleAttempt as exc:
            seen.append(exc)

    async with serving(aclient):
        job = await aclient.insert(Pay(order=1))
        await wait_gate(started)
        await aclient.cancel(job.id)
        gate.set()
        await wait_for(lambda: seen)
    assert "no longer owns the job" in str(seen[0])
    final = await aclient.get_job(job.id)
    assert (final.state, final.callback_id) == ("cancelled", None)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_invalid_cel_at_registration_raises_validation_error(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    seen: list[BaseException] = []
    invalid: list[dict[str, Any]] = [{"filter": "payload.("}, {"on_fail": "secret > 1"}]
    if flavor == "async":

        @aclient.task(Pay, queue="q")
        async def pay(job: wai.Job[Pay]) -> None:
            for bad in invalid:
                try:
                    await job.register_callback(**bad)
                except wai.ValidationError as exc:
                    seen.append(exc)

    else:

        @aclient.task(Pay, queue="q")
        def pay_sync(job: wai.Job[Pay]) -> None:
            for bad in invalid:
                try:
                    job.register_callback_sync(**bad)
                except wai.ValidationError as exc:
                    seen.append(exc)

    async with serving(aclient):
        job = await aclient.insert(Pay(order=1))
        final = await wait_job(aclient, job.id, "completed")
    assert len(seen) == 2
    assert "not valid CEL" in str(seen[0])
    assert "may only use `payload`" in str(seen[1])
    assert final.callback_id is None


async def test_registered_expressions_drive_resolve_callback(aclient: wai.AsyncClient) -> None:
    tokens: list[wai.CallbackToken] = []

    @aclient.task(Pay, queue="q")
    async def pay(job: wai.Job[Pay]) -> wai.WaitForCallback:
        token = await job.register_callback(
            timeout=60,
            filter='payload.type == "charge"',
            on_complete='payload.status == "succeeded"',
            on_fail='payload.status == "failed"',
            transform='{"charge": payload.id}',
        )
        tokens.append(token)
        return wai.WaitForCallback(token)

    async with serving(aclient):
        job = await aclient.insert(Pay(order=1))
        await wait_job(aclient, job.id, "waiting_external")
        cid = tokens[0].id
        assert (await aclient.resolve_callback(cid, {"type": "ping"}, "fail")).action == "ignored"
        res = await aclient.resolve_callback(
            cid, {"type": "charge", "status": "succeeded", "id": "ch_1"}
        )
    assert res.action == "completed"
    assert res.job.callback_result == {"charge": "ch_1"}


# -- waiting in place -------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_two_sequential_waits_in_one_attempt(aclient: wai.AsyncClient, flavor: str) -> None:
    tokens: list[wai.CallbackToken] = []
    got: list[Any] = []
    if flavor == "async":

        @aclient.task(Pay, queue="q")
        async def pay(job: wai.Job[Pay]) -> None:
            for _ in range(2):
                token = await job.register_callback(timeout=60)
                tokens.append(token)
                got.append(await job.wait_for_callback(token))

    else:

        @aclient.task(Pay, queue="q")
        def pay_sync(job: wai.Job[Pay]) -> None:
            for _ in range(2):
                token = job.register_callback_sync(timeout=60)
                tokens.append(token)
                got.append(job.wait_for_callback_sync(token))

    async with serving(aclient, {"q": 1}):
        job = await aclient.insert(Pay(order=1))
        await wait_for(lambda: len(tokens) == 1)
        waiting = await wait_job(aclient, job.id, "waiting_external")
        assert waiting.callback_id == tokens[0].id
        assert waiting.heartbeat_at is not None  # a live waiter keeps heartbeating
        beat = await wait_job(
            aclient,
            job.id,
            lambda r: (
                r.heartbeat_at is not None
                and waiting.heartbeat_at is not None
                and r.heartbeat_at > waiting.heartbeat_at
            ),
        )
        assert beat.state == "waiting_external"
        resumed = await aclient.resume_external(tokens[0].id, "step one")
        assert resumed.state == "running"

        await wait_for(lambda: len(tokens) == 2)
        second = await wait_job(
            aclient,
            job.id,
            lambda r: r.state == "waiting_external" and r.callback_id == tokens[1].id,
        )
        assert (second.attempt, second.run_lease) == (waiting.attempt, waiting.run_lease)
        with pytest.raises(wai.CallbackNotFound):  # the first step's id is spent
            await aclient.resume_external(tokens[0].id, "again")
        await aclient.resume_external(tokens[1].id, {"step": 2})
        done = await wait_job(aclient, job.id, "completed")
    assert got == ["step one", {"step": 2}]
    assert (done.attempt, done.run_lease) == (1, waiting.run_lease)
    assert done.callback_id is None


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_each_wait_in_place_emits_its_event_and_commits_its_followups(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    """A wait in place is a running → waiting_external transition like a park: its
    WaitingForCallback event and on_waiting_for_callback_enqueue follow-ups fire, once
    per wait (two waits of one attempt share its run lease, so lineage names the
    callback), committed with the transition itself."""
    tokens: list[wai.CallbackToken] = []
    seen_rows: list[wai.JobRow] = []
    if flavor == "async":

        @aclient.task(Pay, queue="q")
        async def pay(job: wai.Job[Pay]) -> None:
            for step in range(2):
                token = await job.register_callback(timeout=60)
                tokens.append(token)
                if step == 0:  # a wait that times out, then a wait again on the same id
                    with pytest.raises(TimeoutError):
                        await job.wait_for_callback(token, timeout=0.2)
                await job.wait_for_callback(token)

    else:

        @aclient.task(Pay, queue="q")
        def pay_sync(job: wai.Job[Pay]) -> None:
            for step in range(2):
                token = job.register_callback_sync(timeout=60)
                tokens.append(token)
                if step == 0:
                    with pytest.raises(TimeoutError):
                        job.wait_for_callback_sync(token, timeout=0.2)
                job.wait_for_callback_sync(token)

    events: list[wai.events.JobEvent] = []
    aclient.on_event(Pay, events.append)

    @aclient.on_waiting_for_callback_enqueue(Pay, name="watch")
    def watch(args: Pay, job: wai.JobRow) -> Watch:
        seen_rows.append(job)
        return Watch(order=args.order)

    async def watches() -> list[wai.JobRow]:
        return await aclient.list_jobs(trigger_job_id=job.id)

    async with serving(aclient, {"q": 1}):
        job = await aclient.insert(Pay(order=5))
        await wait_for(lambda: len(tokens) == 1)
        first = await wait_job(
            aclient, job.id, lambda r: r.state == "waiting_external" and r.callback_id is not None
        )
        # the follow-up is there as soon as the row shows the wait: same transaction
        [one] = await watches()
        # after its timeout, the handler waits again on the same callback
        await wait_for(
            lambda: sum(isinstance(e, wai.events.WaitingForCallback) for e in events) >= 2
        )
        await wait_job(aclient, job.id, "waiting_external")
        await aclient.resume_external(tokens[0].id, "one")
        await wait_for(lambda: len(tokens) == 2)
        await wait_job(
            aclient,
            job.id,
            lambda r: r.state == "waiting_external" and r.callback_id == tokens[1].id,
        )
        await aclient.resume_external(tokens[1].id, "two")
        await wait_job(aclient, job.id, "completed")
        await wait_for(lambda: len(events) >= 5)

    assert first.heartbeat_at is not None  # a wait in place, not a park
    followups = await watches()
    triggers = sorted((f.trigger.run_lease, f.trigger.spec) for f in followups if f.trigger)
    # three waits (the first one twice on one callback), two callbacks: two follow-ups
    assert triggers == sorted((first.run_lease, f"watch@{t.id}") for t in (tokens[0], tokens[1]))
    assert one.trigger == wai.Trigger(
        job_id=job.id,
        run_lease=first.run_lease,
        outcome="waiting_for_callback",
        spec=f"watch@{tokens[0].id}",
    )
    assert {f.args["order"] for f in followups} == {5}
    assert [r.callback_id for r in seen_rows][-1] == tokens[1].id
    waits = [e for e in events if isinstance(e, wai.events.WaitingForCallback)]
    assert [e.job.callback_id for e in waits] == [tokens[0].id, tokens[0].id, tokens[1].id]
    assert all(e.job.state == "waiting_external" for e in waits)
    assert waits[0].args == Pay(order=5)
    assert [type(e) for e in events][-1] is wai.events.Completed


async def test_a_failing_wait_followup_rolls_the_wait_back_and_fails_the_attempt(
    aclient: wai.AsyncClient,
) -> None:
    seen: list[BaseException] = []

    @aclient.task(Pay, queue="q", max_attempts=1)
    async def pay(job: wai.Job[Pay]) -> None:
        token = await job.register_callback(timeout=60)
        try:
            await job.wait_for_callback(token)
        except wai.FollowUpError as exc:
            seen.append(exc)
            raise

    def broken(args: Pay, job: wai.JobRow) -> Watch:
        raise RuntimeError("watch service down")

    aclient.on_waiting_for_callback_enqueue(Pay, broken, name="watch")
    events: list[wai.events.JobEvent] = []
    aclient.on_event(Pay, events.append)
    async with serving(aclient, {"q": 1}):
        job = await aclient.insert(Pay(order=1))
        failed = await wait_job(aclient, job.id, "failed")
        await asyncio.sleep(0.1)
    assert "watch service down" in str(seen[0])
    assert "'watch'" in failed.errors[-1]["error"]
    assert await aclient.list_jobs(trigger_job_id=job.id) == []
    # the wait never committed: no WaitingForCallback, and the row never showed it
    assert not any(isinstance(e, wai.events.WaitingForCallback) for e in events)


async def test_a_resume_that_beats_the_wait_is_not_lost(aclient: wai.AsyncClient) -> None:
    tokens: list[wai.CallbackToken] = []
    gate = threading.Event()
    got: list[Any] = []

    @aclient.task(Pay, queue="q")
    async def pay(job: wai.Job[Pay]) -> None:
        token = await job.register_callback()
        tokens.append(token)
        await wait_gate(gate)
        got.append(await job.wait_for_callback(token, timeout=5))

    async with serving(aclient):
        job = await aclient.insert(Pay(order=1))
        await wait_for(lambda: tokens)
        await aclient.resume_external(tokens[0].id, "fast")
        gate.set()
        await wait_job(aclient, job.id, "completed")
    assert got == ["fast"]


async def test_a_wait_timeout_puts_the_job_back_to_running(aclient: wai.AsyncClient) -> None:
    seen: list[Any] = []

    @aclient.task(Pay, queue="q")
    async def pay(job: wai.Job[Pay]) -> None:
        token = await job.register_callback(timeout=60)
        try:
            await job.wait_for_callback(token, timeout=0.3)
        except TimeoutError as exc:
            seen.append(exc)
        seen.append(await job.flush_progress())  # still live, as running

    async with serving(aclient):
        job = await aclient.insert(Pay(order=1))
        done = await wait_job(aclient, job.id, "completed")
    assert isinstance(seen[0], TimeoutError)
    assert seen[1] is True
    assert done.callback_id is None


@pytest.mark.parametrize("resolution", ["complete_external", "cancel"])
async def test_a_wait_ended_otherwise_raises_stale_attempt_and_is_fenced(
    aclient: wai.AsyncClient, resolution: str
) -> None:
    tokens: list[wai.CallbackToken] = []
    seen: list[BaseException] = []

    @aclient.task(Pay, queue="q")
    async def pay(job: wai.Job[Pay]) -> None:
        token = await job.register_callback()
        tokens.append(token)
        try:
            await job.wait_for_callback(token)
        except wai.StaleAttempt as exc:
            seen.append(exc)
            raise

    aclient.on_completed_enqueue(Pay, lambda args, job: Receipt(order=args.order))
    async with serving(aclient):
        job = await aclient.insert(Pay(order=1))
        await wait_job(aclient, job.id, "waiting_external")
        if resolution == "cancel":
            await aclient.cancel(job.id)
        else:
            await aclient.complete_external(tokens[0].id, "direct")
        await wait_for(lambda: seen)
        await wait_for(lambda: attempts_settled(aclient))
    final = await aclient.get_job(job.id)
    expected = "cancelled" if resolution == "cancel" else "completed"
    assert final.state == expected
    assert len(final.errors) == (1 if resolution == "cancel" else 0)  # the handler's raise: fenced
    receipts = await aclient.list_jobs(trigger_job_id=job.id)
    assert len(receipts) == (0 if resolution == "cancel" else 1)


# -- shutdown ---------------------------------------------------------------------------


async def test_a_resume_during_shutdown_lets_the_waiting_handler_finish(
    aclient: wai.AsyncClient,
) -> None:
    tokens: list[wai.CallbackToken] = []

    @aclient.task(Pay, queue="q")
    async def pay(job: wai.Job[Pay]) -> None:
        token = await job.register_callback()
        tokens.append(token)
        await job.wait_for_callback(token)

    await aclient.start({"q": 1}, **FAST)
    job = await aclient.insert(Pay(order=1))
    await wait_job(aclient, job.id, "waiting_external")
    stopping = asyncio.create_task(aclient.shutdown(timeout=10))
    await asyncio.sleep(0.3)
    assert not stopping.done()  # the grace period waits for the handler
    await aclient.resume_external(tokens[0].id, "just in time")
    await asyncio.wait_for(stopping, 10)
    assert (await aclient.get_job(job.id)).state == "completed"


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_wait_cut_short_by_shutdown_returns_the_job_and_voids_the_callback(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    tokens: list[wai.CallbackToken] = []
    seen: list[BaseException] = []
    if flavor == "async":

        @aclient.task(Pay, queue="q")
        async def pay(job: wai.Job[Pay]) -> None:
            token = await job.register_callback()
            tokens.append(token)
            await job.wait_for_callback(token)

    else:

        @aclient.task(Pay, queue="q")
        def pay_sync(job: wai.Job[Pay]) -> None:
            token = job.register_callback_sync()
            tokens.append(token)
            try:
                job.wait_for_callback_sync(token)
            except wai.StaleAttempt as exc:
                seen.append(exc)
                raise

    await aclient.start({"q": 1}, **FAST)
    job = await aclient.insert(Pay(order=1))
    await wait_job(aclient, job.id, "waiting_external")
    await asyncio.wait_for(aclient.shutdown(timeout=0.3), 10)
    after = await aclient.get_job(job.id)
    assert (after.state, after.attempt, after.callback_id) == ("available", 0, None)
    with pytest.raises(wai.CallbackNotFound):
        await aclient.resume_external(tokens[0].id, "too late")
    if flavor == "sync":
        await wait_for(lambda: seen)  # the blocked thread was released at once
        assert "abandoned" in str(seen[0])


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_the_deadline_still_applies_while_waiting_in_place(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    seen: list[BaseException] = []
    if flavor == "async":

        @aclient.task(Pay, queue="q", deadline=0.5)
        async def pay(job: wai.Job[Pay]) -> None:
            await job.wait_for_callback(await job.register_callback())

    else:

        @aclient.task(Pay, queue="q", deadline=0.5)
        def pay_sync(job: wai.Job[Pay]) -> None:
            try:
                job.wait_for_callback_sync(job.register_callback_sync())
            except wai.StaleAttempt as exc:
                seen.append(exc)

    async with serving(aclient):
        job = await aclient.insert(Pay(order=1), max_attempts=1)
        failed = await wait_job(aclient, job.id, "failed")
        if flavor == "sync":
            await wait_for(lambda: seen)  # the thread's wait was released too
    assert "deadline of 0.5s exceeded" in failed.errors[-1]["error"]
    assert failed.callback_id is None
