"""Callbacks of running attempts: registration, and waits in place woken by NOTIFY."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai import _db_async as db
from wai._translate import translate_errors
from wai.callbacks import CallbackExpressions
from wai.context import AttemptState
from wai.errors import StaleAttempt, ValidationError
from wai.results import CallbackToken
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
    """

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection[Any]], schema: str, poll_interval: float
    ) -> None:
        self._pool = pool
        self._schema = schema
        self._poll = poll_interval
        self._events: dict[Key, set[asyncio.Event]] = {}

    async def register(
        self, state: AttemptState, *, timeout: float, expressions: CallbackExpressions
    ) -> CallbackToken:
        """Write a fresh callback id under the attempt's lease guard; its token."""
        callback_id = uuid.uuid4()
        async with self._pool.connection() as conn:
            with translate_errors(self._schema):
                registered = await db.job_callback_register(
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
        async with self._pool.connection() as conn:
            with translate_errors(self._schema):
                await db.job_callback_park_in_place(
                    conn,
                    self._schema,
                    job_id=state.job_id,
                    run_lease=state.run_lease,
                    callback_id=token.id,
                )
        while True:
            event.clear()
            try:
                async with self._pool.connection() as conn:
                    rec = await db.job_callback_take(
                        conn, self._schema, job_id=state.job_id, run_lease=state.run_lease
                    )
            except psycopg.OperationalError as exc:
                # A database blip must not end a long wait: poll again.
                logger.warning("wai: job %s: callback poll failed (%s)", state.job_id, exc)
            else:
                if rec is not None and rec["taken"]:
                    state.callback_id = None
                    return rec["callback_result"]
                _check_live(state, token, rec)
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                await self._unpark(state)
                raise TimeoutError(
                    f"no resume_external for callback {token.id} within {timeout:g}s"
                )
            pause = self._poll if remaining is None else min(self._poll, remaining)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), pause)

    async def _unpark(self, state: AttemptState) -> None:
        async with self._pool.connection() as conn:
            with translate_errors(self._schema):
                await db.job_callback_unpark(
                    conn, self._schema, job_id=state.job_id, run_lease=state.run_lease
                )


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
    elif rec["run_lease"] != state.run_lease:
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
