"""Keeps background loops alive: an unexpected exception is logged and the loop goes on.

Every long-running task of a worker or maintenance process (claim loops, the
finalizer, heartbeats, LISTEN, the runtime record, hooks, the outbox sweeper, the
elector and the leader's services) runs through one of two helpers:

- :func:`repeat` for a loop made of passes: a pass that raises is logged with its
  traceback and the next pass runs after a backoff;
- :func:`supervise` for a loop that keeps state across iterations and cannot simply
  skip one: it is restarted from scratch after a backoff.

Expected failures (the database unreachable) are handled, and logged more quietly,
inside the loops themselves; these helpers catch what nobody foresaw, so one bad value
or one bug costs a pass, never the task for the rest of the process's life.
``asyncio.CancelledError`` (a ``BaseException``) is never caught: cancelling the task
stops it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

__all__ = ["Backoff", "repeat", "supervise"]

logger = logging.getLogger("wai")


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
) -> None:
    """Await ``step()`` every ``interval`` seconds until cancelled.

    With ``sleep_first`` the loop waits ``interval`` before the first step. A step
    that raises an ``Exception`` is logged with its traceback; the next one runs
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
        except Exception:
            delay = backoff.next()
            logger.exception("wai: %s failed; next try in %.2f s", name, delay)
        else:
            backoff.reset()
            delay = interval


async def supervise(
    name: str,
    run: Callable[[], Awaitable[None]],
    *,
    base: float = 0.1,
    cap: float = 5.0,
) -> None:
    """Await ``run()`` until it returns; restart it after an unexpected ``Exception``.

    The exception is logged with its traceback and ``run()`` starts afresh after a
    backoff: ``base``, doubling while it keeps failing, at most ``cap``; a run that
    lasted longer than ``cap`` counts as a success (the next failure waits ``base``).
    Cancellation propagates.
    """
    backoff = Backoff(base, cap)
    while True:
        started = time.monotonic()
        try:
            await run()
        except Exception:
            if time.monotonic() - started > backoff.cap:
                backoff.reset()
            delay = backoff.next()
            logger.exception("wai: %s failed; restarting it in %.2f s", name, delay)
        else:
            return
        await asyncio.sleep(delay)
