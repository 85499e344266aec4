"""Refreshes the heartbeat of every attempt whose outcome is not yet written, per interval."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai._context import AttemptState
from wai._supervise import repeat
from wai.worker import _queries as worker_db

__all__ = ["Heartbeater"]

logger = logging.getLogger("wai.worker")

CHUNK = 1000


class Heartbeater:
    """Batched heartbeats (with pending progress) for the attempts of this process.

    An attempt whose row no longer matches ``(id, running, run_lease)`` was
    rescued or cancelled elsewhere: its ``is_cancelled()`` flips to true.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        interval: float,
        attempts: Callable[[], Sequence[AttemptState]],
    ) -> None:
        self._pool = pool
        self._schema = schema
        self._interval = interval
        self._attempts = attempts
        #: time.monotonic() of the last heartbeat pass that succeeded (for the runtime record)
        self.last_beat_at: float | None = None

    async def run_forever(self) -> None:
        """Beat every interval until cancelled.

        A database error is logged as a warning, anything unexpected with its
        traceback; either way the next pass runs one interval later (no backoff:
        missing beats gets live attempts rescued).
        """
        await repeat(
            "heartbeat", self._pass, interval=self._interval, sleep_first=True, cap=self._interval
        )

    async def _pass(self) -> None:
        try:
            await self.beat(self._attempts())
        except psycopg.Error as exc:
            logger.warning("wai: heartbeat failed (%s); retrying next interval", exc)
            return
        self.last_beat_at = time.monotonic()

    async def beat(self, attempts: Sequence[AttemptState], *, force: bool = False) -> set[int]:
        """Heartbeat ``attempts``; returns the ids of those still live.

        An attempt whose handler returned (``finished``) keeps beating until the
        finalizer writes its outcome, with a statement that skips rows the finalizer
        has locked and writes no progress; it is never reported live (its handler
        has nothing left to learn).
        """
        # Running attempts first: a database error in between costs the finished ones.
        live_ids = await self._beat_running(
            [a for a in attempts if a.finished is None], force=force
        )
        finished = [(a.job_id, a.run_lease) for a in attempts if a.finished is not None]
        for start in range(0, len(finished), CHUNK):
            async with self._pool.connection() as conn:
                await worker_db.job_heartbeat_finished(
                    conn, self._schema, finished[start : start + CHUNK]
                )
        return live_ids

    async def _beat_running(self, attempts: Sequence[AttemptState], *, force: bool) -> set[int]:
        live_ids: set[int] = set()
        for start in range(0, len(attempts), CHUNK):
            chunk = attempts[start : start + CHUNK]
            items = [
                (
                    a.job_id,
                    a.run_lease,
                    a.current_progress_json() if force else a.progress_json(take=True),
                )
                for a in chunk
            ]
            try:
                async with self._pool.connection() as conn:
                    live = await worker_db.job_heartbeat_many(conn, self._schema, items)
            except BaseException:
                # The progress taken for this beat was not written: the next beat sends it again.
                for a, item in zip(chunk, items, strict=True):
                    if item[2] is not None:
                        a.dirty = True
                raise
            for a in chunk:
                if (a.job_id, a.run_lease) in live:
                    live_ids.add(a.job_id)
                else:
                    a.cancelled.set()
        return live_ids
