"""Tells the other processes that attempts of a globally capped queue ended.

An attempt ending frees a slot of its queue's global concurrency for the whole cluster,
but no statement of the outcome wakes anybody: the claim loops of other processes held
back by the cap would only look again at their next poll. For the queues under a global
concurrency, the runtime hands the queues of each written batch to this loop, which sends
one NOTIFY per queue on the jobs channel (the same wakeup an insert sends). A lost note
costs latency only: capped claim loops poll anyway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai import _db_async as db
from wai._supervise import supervise

__all__ = ["Announcer"]

logger = logging.getLogger("wai.worker")


class Announcer:
    """Sends a wakeup for queues whose attempts ended, a batch at a time."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[Any]], schema: str) -> None:
        self._pool = pool
        self._schema = schema
        self._pending: set[str] = set()
        self._ready = asyncio.Event()
        self.sent = 0

    def announce(self, queues: Iterable[str]) -> None:
        """Wake the workers of ``queues`` soon (never waits)."""
        self._pending.update(queues)
        if self._pending:
            self._ready.set()

    async def run_forever(self) -> None:
        """Send until cancelled; restarted after an unexpected error."""
        await supervise("wakeup announcer", self._loop)

    async def _loop(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            queues, self._pending = sorted(self._pending), set()
            try:
                async with self._pool.connection() as conn:
                    await db.job_notify_queues(conn, self._schema, queues)
                self.sent += len(queues)
            except psycopg.Error as exc:  # the capped loops poll: a lost wakeup is late work
                logger.debug("wai: could not wake the workers of %s (%s)", queues, exc)
