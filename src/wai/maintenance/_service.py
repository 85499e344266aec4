"""The shape of every maintenance service: ``run_once`` plus a loop around it."""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from typing import Any, ClassVar

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai._logging import emit
from wai._pace import IdlePace
from wai._supervise import repeat, repeat_paced

__all__ = [
    "SCAN_SHARE",
    "SPACED_FROM",
    "START_SPREAD",
    "PeriodicService",
    "spaced",
    "staggered",
    "stop_tasks",
]

logger = logging.getLogger("wai.maintenance")

#: The share of their time the passes that read every live row of a state (rescue, depth
#: samples, priority aging) may take: 2 %, so a pass that took 1 s waits 49 s for the next.
SCAN_SHARE = 0.02


async def stop_tasks(tasks: Collection[asyncio.Task[Any]], *, retry: float = 5.0) -> None:
    """Cancel ``tasks`` and return once every one has ended.

    A task can absorb a cancellation: on Python 3.11 ``asyncio.wait_for`` (which
    psycopg_pool uses while a client waits for a connection) drops a cancel that
    arrives together with its result, and the loop then carries on. Such a task is
    cancelled again every ``retry`` seconds until it ends. The caller's own
    cancellation is never swallowed here (unlike ``suppress(CancelledError)``
    around ``await task``).
    """
    pending = {t for t in tasks if not t.done()}
    while pending:
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=retry)
    for t in tasks:
        if not t.cancelled() and (exc := t.exception()) is not None:
            emit(
                logger,
                logging.ERROR,
                "wai: task %s had failed: %r",
                t.get_name(),
                exc,
                exc_info=exc,
            )


#: Passes quicker than this (seconds) never space the next one out: a busy test database,
#: or a short interval, keeps its cadence.
SPACED_FROM = 0.1


def spaced(wait: float, took: float, share: float | None) -> float:
    """The wait after a pass that took ``took`` seconds, where the service would wait
    ``wait``: at least long enough that its passes take no more than ``share`` of its
    time (``took * (1 - share) / share``); ``wait`` itself when ``share`` is None or the
    pass took less than :data:`SPACED_FROM` (pure).
    """
    if share is None or took < SPACED_FROM:
        return wait
    return max(wait, took * (1.0 - share) / share)


#: Over how many seconds a new leader's services begin (:func:`staggered`).
START_SPREAD = 5.0


def staggered(intervals: Sequence[float], spread: float = START_SPREAD) -> list[float]:
    """When each of a new leader's services runs its first pass (seconds from now, pure).

    Not all at once: a process that has just started (or just won the election) is also
    opening its connections and claiming its queues' first batches, and every service's
    first pass at the same moment each want a connection of its pool, which grows for them,
    and the server's CPU. The ``i``-th of ``n`` services starts at ``spread * (i + 1) / (n + 1)``,
    but never later than its own interval: a service is never later than if its loop had
    begun by waiting one interval.
    """
    n = len(intervals)
    return [min(interval, spread * (i + 1) / (n + 1)) for i, interval in enumerate(intervals)]


class PeriodicService(ABC):
    """Runs ``run_once`` every ``interval`` seconds until cancelled, on ``pool`` and ``schema``.

    Tests call ``run_once`` directly and never wait on the loop.
    """

    #: The largest share of its time a service's passes may take (None: no bound). A pass
    #: whose cost grows with what vacuum has not removed yet (entries of dead rows in the
    #: partial indexes it reads, which an old snapshot keeps for as long as it is held)
    #: then spaces the next one out instead of taking ever more of the server.
    share: ClassVar[float | None] = None
    _took = 0.0  # seconds the last pass took

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        interval: float,
        pace: IdlePace | None = None,
    ) -> None:
        self.interval = interval
        self._pool = pool
        self._schema = schema
        self._pace = pace

    @abstractmethod
    async def run_once(self) -> object:
        """One pass; returns a small result for logs and tests."""

    async def run_forever(self) -> None:
        """Loop until cancelled.

        Without a ``pace``, a pass is followed by the next after :meth:`next_wait`
        seconds, or longer if the pass took more than the service's :attr:`share` of
        that time (:func:`spaced`). A pass that raises is logged with its traceback and
        the next one runs after ``interval``, doubled for each consecutive failure, at most
        ``max(interval, 30)`` seconds (see :func:`wai._supervise.repeat`).
        With a ``pace`` (services that know when they are next due: promotion, cron) a
        pass that found nothing lets the next one wait longer while notifications can
        wake the service (:func:`wai._supervise.repeat_paced`).
        """
        if self._pace is None:
            await repeat(type(self).__name__, self._pass, interval=self.interval, after=self._after)
        else:
            name = type(self).__name__
            await repeat_paced(name, self._paced_pass, interval=self.interval, pace=self._pace)

    async def _pass(self) -> object:
        began = time.monotonic()
        try:
            result = await self.run_once()
        finally:
            self._took = time.monotonic() - began
        logger.debug("wai: %s pass: %s", type(self).__name__, result)
        return result

    def _after(self) -> float:
        return spaced(self.next_wait(), self._took, self.share)

    async def _paced_pass(self) -> tuple[bool, float | None]:
        return self.idle_state(await self._pass())

    def next_wait(self) -> float:
        """Seconds from the end of a pass that succeeded to the next one: ``interval``,
        unless the service knows better (the cleaner while jobs expire fast)."""
        return self.interval

    def idle_state(self, result: object) -> tuple[bool, float | None]:
        """``(busy, due_in)`` of a pass's result: whether it did something, and the
        seconds until it knows it has work. By default always busy (never backs off)."""
        return True, None
