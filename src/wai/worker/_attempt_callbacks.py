"""Callbacks of running attempts: registration, and waits in place woken by NOTIFY."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai import _inserts_db_async as inserts_db
from wai._context import AttemptState
from wai._followups import plan_followups
from wai._inserts import NewJob
from wai._job import JobRow, JobState
from wai._logging import emit, job_extra
from wai._outcomes import Outcome
from wai._registry import Registry
from wai._results import CallbackToken
from wai._translate import translate_errors
from wai.callbacks import CallbackExpressions
from wai.callbacks import _queries_async as callback_db
from wai.errors import FollowUpError, StaleAttempt, ValidationError, WaiError
from wai.worker._hooks import HookDispatcher
from wai.worker._notifier import parse_cancel

__all__ = ["AttemptCallbacks"]

logger = logging.getLogger("wai.worker")

Key = tuple[int, int]


class AttemptCallbacks:
    """Registers callbacks for the attempts of this process and runs their in-place waits.

    A waiting handler polls its row every ``poll_interval`` and is woken early by
    a NOTIFY on ``<schema>.callback`` (see :meth:`notify`), which every
    resolution sends. While it waits, the row is ``waiting_external`` with its
    heartbeat kept fresh by the runtime, so a dead worker is rescued as stale.

    Starting a wait is a transition (running → waiting_external) like a park: its
    ``on_waiting_for_callback_enqueue`` follow-ups (from ``registry``) commit in the
    same transaction, and ``hooks`` get its ``WaitingForCallback`` event after commit.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        poll_interval: float,
        *,
        registry: Registry | None = None,
        hooks: HookDispatcher | None = None,
    ) -> None:
        self._pool = pool
        self._schema = schema
        self._poll = poll_interval
        self._registry = registry if registry is not None else Registry()
        self._hooks = hooks
        self._events: dict[Key, set[asyncio.Event]] = {}

    async def register(
        self, state: AttemptState, *, timeout: float, expressions: CallbackExpressions
    ) -> CallbackToken:
        """Write a fresh callback id under the attempt's lease guard; its token."""
        # Random: whoever holds the id can resolve the job, as with a bearer token.
        callback_id = uuid.uuid4()
        async with self._pool.connection() as conn:
            with translate_errors(self._schema):
                registered = await callback_db.job_callback_register(
                    conn,
                    self._schema,
                    job_id=state.job_id,
                    run_lease=state.run_lease,
                    callback_id=callback_id,
                    timeout=timeout,
                    expressions=expressions,
                )
        if registered is None:
            raise StaleAttempt(
                f"job {state.job_id}: this attempt (run lease {state.run_lease}) no longer owns "
                "the job (rescued, cancelled or claimed again); no callback was registered"
            )
        state.callback_id = callback_id
        state.callback_timeout_at = registered
        return CallbackToken(id=callback_id, job_id=state.job_id, run_lease=state.run_lease)

    def notify(self, payload: str) -> None:
        """A ``<schema>.callback`` notification: wake the waits of that attempt."""
        key = parse_cancel(payload)
        if key is not None:
            self.wake(key)

    def wake(self, key: Key) -> None:
        """Make the waits of attempt ``(job_id, run_lease)`` look at their row now."""
        for event in self._events.get(key, ()):
            event.set()

    async def wait(self, state: AttemptState, token: CallbackToken, timeout: float | None) -> Any:
        """Wait in place until ``resume_external`` hands over a payload; return it."""
        if not isinstance(token, CallbackToken):
            raise ValidationError(
                f"wait_for_callback needs the wai.CallbackToken of register_callback, "
                f"got {type(token).__name__}"
            )
        if (token.job_id, token.run_lease) != (state.job_id, state.run_lease):
            raise ValidationError(
                f"wait_for_callback got the token of job {token.job_id} (run lease "
                f"{token.run_lease}), not of this attempt (job {state.job_id}, run lease "
                f"{state.run_lease})"
            )
        if token.id != state.callback_id:
            raise ValidationError(
                f"callback {token.id} is not this attempt's registered callback (already "
                "resumed, or replaced by a later register_callback): register a new one "
                "for each step"
            )
        key = (state.job_id, state.run_lease)
        event = asyncio.Event()
        self._events.setdefault(key, set()).add(event)
        try:
            return await self._wait(state, token, timeout, event)
        finally:
            waiters = self._events.get(key)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._events[key]

    async def _wait(
        self,
        state: AttemptState,
        token: CallbackToken,
        timeout: float | None,
        event: asyncio.Event,
    ) -> Any:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        parked = await self._park(state, token)
        if parked is not None and self._hooks is not None:
            self._hooks.waiting(parked)
        while True:
            # Cleared before reading the row, so a NOTIFY that lands during the read is not lost.
            event.clear()
            try:
                async with self._pool.connection() as conn:
                    rec = await callback_db.job_callback_take(
                        conn, self._schema, job_id=state.job_id, run_lease=state.run_lease
                    )
            except psycopg.OperationalError as exc:
                # A database blip must not end a long wait: poll again.
                emit(
                    logger,
                    logging.WARNING,
                    "wai: job %s: callback poll failed (%s)",
                    state.job_id,
                    exc,
                    extra=job_extra(state.row, callback_id=str(token.id)),
                )
            else:
                if rec is not None and rec["taken"]:
                    state.callback_id = None
                    return rec["callback_result"]
                _check_live(state, token, rec)
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                # Back to running: the handler goes on past its TimeoutError, heartbeating.
                await self._unpark(state)
                raise TimeoutError(
                    f"no resume_external for callback {token.id} within {timeout:g}s"
                )
            pause = self._poll if remaining is None else min(self._poll, remaining)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), pause)

    async def _park(self, state: AttemptState, token: CallbackToken) -> JobRow | None:
        """running → waiting_external (heartbeat kept) and the wait's follow-ups, atomically.

        Returns the parked row, or None when nothing was parked (the callback was
        resolved or resumed first: the poll that follows sees it). A failing
        follow-up spec rolls the park back and raises :class:`wai.FollowUpError`
        into the handler, whose attempt then fails with that error (SPEC §4.3).
        """
        outcome = Outcome(
            job_id=state.job_id,
            run_lease=state.run_lease,
            state=JobState.WAITING_EXTERNAL,
            event="waiting_for_callback",
            callback_id=token.id,
            trace=state.trace,
        )
        wanted = bool(self._registry.specs_for(state.kind, outcome.event))
        async with self._pool.connection() as conn:
            with translate_errors(self._schema):
                async with conn.transaction():
                    row = await callback_db.job_callback_park_in_place(
                        conn,
                        self._schema,
                        job_id=state.job_id,
                        run_lease=state.run_lease,
                        callback_id=token.id,
                    )
                    if row is not None and wanted:
                        await self._followups(conn, row, outcome, token)
        return row

    async def _followups(
        self, conn: AsyncConnection[Any], row: JobRow, outcome: Outcome, token: CallbackToken
    ) -> None:
        plan = plan_followups(self._registry, [row], {row.id: outcome})
        if plan.failed:
            raise plan.failed[row.id]
        # One attempt may wait in place many times, all under one run lease: each wait's
        # lineage names its callback, so each gets its follow-ups, exactly once.
        done = await callback_db.job_callback_wait_specs(
            conn, self._schema, job_id=row.id, run_lease=row.run_lease
        )
        jobs = [j for j in (_per_wait(j, token) for j in plan.jobs) if _spec(j) not in done]
        try:
            await inserts_db.insert_followups(conn, self._schema, jobs)
        except WaiError as exc:
            raise FollowUpError(f"follow-up insert failed: {exc}") from exc

    async def _unpark(self, state: AttemptState) -> None:
        async with self._pool.connection() as conn:
            with translate_errors(self._schema):
                await callback_db.job_callback_unpark(
                    conn, self._schema, job_id=state.job_id, run_lease=state.run_lease
                )


def wait_spec_name(spec: str, callback_id: uuid.UUID) -> str:
    """The lineage spec name of a wait in place's follow-up: ``"<spec>@<callback id>"``."""
    return f"{spec}@{callback_id}"


def _per_wait(job: NewJob, token: CallbackToken) -> NewJob:
    trigger = job.trigger
    assert trigger is not None
    job_id, lease, outcome, spec = trigger
    return dataclasses.replace(
        job, trigger=(job_id, lease, outcome, wait_spec_name(spec, token.id))
    )


def _spec(job: NewJob) -> str:
    assert job.trigger is not None
    return job.trigger[3]


def _check_live(state: AttemptState, token: CallbackToken, rec: dict[str, Any] | None) -> None:
    """Raise :class:`wai.StaleAttempt` unless the row still waits on ``token``."""
    if (
        rec is not None
        and rec["run_lease"] == state.run_lease
        and rec["state"] in ("waiting_external", "running")
        and rec["callback_id"] == token.id
    ):
        return
    if rec is None:
        what = "was deleted"
    elif rec["run_lease"] != state.run_lease and rec["state"] in ("waiting_external", "running"):
        what = "was claimed again by another attempt"
    else:
        what = (
            f"is {rec['state']}: callback {token.id} was resolved otherwise "
            "(complete/fail/retry_external), cancelled or timed out"
        )
    raise StaleAttempt(
        f"job {state.job_id} {what} while this attempt waited for its callback; "
        "the attempt's result will be discarded"
    )
