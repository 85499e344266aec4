"""Keeps background loops alive: an unexpected exception is logged and the loop goes on.

Every long-running task of a worker or maintenance process (claim loops, the
finalizer, heartbeats, LISTEN, the runtime record, hooks, the outbox sweeper, the
elector and the leader's services) runs through one of two helpers:

- :func:`repeat` for a loop made of passes: a pass that raises is logged with its
  traceback and the next pass runs after a backoff (:func:`repeat_paced` too, for a
  loop that waits longer while idle, :mod:`wai._pace`);
- :func:`supervise` for a loop that keeps state across iterations and cannot simply
  skip one: it is restarted from scratch after a backoff.

Expected failures (the database unreachable) are mostly handled, and logged more
quietly, inside the loops themselves; these helpers catch what nobody foresaw, so one
bad value or one bug costs a pass, never the task for the rest of the process's life.
A database outage that does reach them (a maintenance pass that found the server gone,
a pool that timed out) is logged as a WARNING without a traceback; anything else is an
ERROR with its traceback. The record is written with :func:`wai._logging.emit`: a
broken handler cannot end the loop either.
``asyncio.CancelledError`` (a ``BaseException``) is never caught: cancelling the task
stops it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import psycopg
from psycopg.errors import TransactionRollback
from psycopg_pool import PoolTimeout

from wai._logging import emit
from wai._pace import next_wait, wait_woken

if TYPE_CHECKING:
    from wai._pace import IdlePace

__all__ = ["Backoff", "repeat", "repeat_paced", "supervise"]

logger = logging.getLogger("wai")

#: The database is down, restarting, out of connections, or chose this transaction as
#: a deadlock's victim: a later try can succeed, and a traceback would say nothing more.
_OUTAGES = (psycopg.OperationalError, TransactionRollback, PoolTimeout)


def _log_failure(exc: Exception, what: str, then: str) -> None:
    """Log that ``what`` failed with ``exc``: a database outage quietly, else with the traceback."""
    if isinstance(exc, _OUTAGES):
        text = str(exc).strip()
        emit(
            logger,
            logging.WARNING,
            "wai: %s failed, the database is unavailable (%s: %s); %s",
            what,
            type(exc).__name__,
            text.splitlines()[0] if text else "",
            then,
        )
    else:
        emit(logger, logging.ERROR, "wai: %s failed; %s", what, then, exc_info=exc)


class Backoff:
    """Delays after consecutive failures: ``base``, then doubling, at most ``cap``."""

    def __init__(self, base: float, cap: float) -> None:
        self.base = base
        self.cap = max(cap, base)
        self.failures = 0

    def next(self) -> float:
        """Count one more failure and return how long to wait before trying again."""
        self.failures += 1
        # Capped exponent: past about 1,030 failures, base * 2**n would overflow a float.
        return min(self.base * 2 ** min(self.failures - 1, 32), self.cap)

    def reset(self) -> None:
        """A success: the next failure waits ``base`` again."""
        self.failures = 0


async def repeat(
    name: str,
    step: Callable[[], Awaitable[object]],
    *,
    interval: float,
    sleep_first: bool = False,
    cap: float | None = None,
    after: Callable[[], float] | None = None,
) -> None:
    """Await ``step()`` every ``interval`` seconds until cancelled.

    With ``after``, a step that succeeded is followed by ``after()`` seconds instead
    (a loop whose step knows how soon it has work again: the retention cleaner).
    With ``sleep_first`` the loop waits ``interval`` before the first step. A step
    that raises an ``Exception`` is logged (:func:`_log_failure`); the next one runs
    after ``interval`` doubled for each consecutive failure, at most ``cap``
    (default: ``max(interval, 30)`` seconds; pass ``cap=interval`` for a loop that
    must keep its pace, such as heartbeats). With ``interval`` 0 the step itself
    waits for work, and a failure waits 0.05 s, doubling.
    """
    backoff = Backoff(interval or 0.05, max(interval, 30.0) if cap is None else cap)
    delay = interval if sleep_first else 0.0
    while True:
        if delay > 0:
            await asyncio.sleep(delay)
        try:
            await step()
        except Exception as exc:
            delay = backoff.next()
            _log_failure(exc, name, f"next try in {delay:.2f} s")
        else:
            backoff.reset()
            delay = interval if after is None else after()


async def repeat_paced(
    name: str,
    step: Callable[[], Awaitable[tuple[bool, float | None]]],
    *,
    interval: float,
    pace: IdlePace,
) -> None:
    """Await ``step()`` until cancelled, waiting longer after passes that found nothing.

    ``step`` returns ``(busy, due_in)``: whether the pass did something, and how many
    seconds until it knows it has work (None: it knows of none). The wait after it is
    :func:`wai._pace.next_wait`; a note on ``pace.wakeups`` ends it early, but never
    before ``interval`` (notes come in bursts: passes stay that far apart). The event is
    cleared before each pass, so a note sent during the pass brings the next one sooner.
    A failed step is logged and retried as in :func:`repeat`.
    """
    backoff = Backoff(interval or 0.05, max(interval, 30.0))
    event = pace.wakeups.event()
    idle = 0
    while True:
        event.clear()
        try:
            busy, due_in = await step()
        except Exception as exc:
            delay = backoff.next()
            _log_failure(exc, name, f"next try in {delay:.2f} s")
            await asyncio.sleep(delay)
            continue
        backoff.reset()
        idle = 0 if busy else idle + 1
        delay = next_wait(
            interval, cap=pace.cap, idle=idle, listening=pace.listening(), due_in=due_in
        )
        await wait_woken(event, delay, floor=interval)


async def supervise(
    name: str,
    run: Callable[[], Awaitable[None]],
    *,
    base: float = 0.1,
    cap: float = 5.0,
) -> None:
    """Await ``run()`` until it returns; restart it after an unexpected ``Exception``.

    The exception is logged (:func:`_log_failure`) and ``run()`` starts afresh after a
    backoff: ``base``, doubling while it keeps failing, at most ``cap``; a run that
    lasted longer than ``cap`` counts as a success (the next failure waits ``base``).
    Cancellation propagates.
    """
    backoff = Backoff(base, cap)
    while True:
        started = time.monotonic()
        try:
            await run()
        except Exception as exc:
            if time.monotonic() - started > backoff.cap:
                backoff.reset()
            delay = backoff.next()
            _log_failure(exc, name, f"restarting it in {delay:.2f} s")
        else:
            return
        await asyncio.sleep(delay)
