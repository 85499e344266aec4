"""A worker's throughput counts: tallied as outcomes commit, added to the database in bulk."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai._context import AttemptState
from wai._job import JobRow
from wai._outcomes import Outcome
from wai._supervise import repeat
from wai._tally import OUTCOME_EVENTS, Key, Tally, minute_of
from wai.maintenance import _queries as maintenance_db

__all__ = ["ThroughputRecorder"]

logger = logging.getLogger("wai.worker")


class ThroughputRecorder:
    """Counts this process's committed outcomes and rescues per minute, and writes them.

    Counting is an in-memory increment per committed row (:class:`wai._tally.Tally`),
    done where the finalizer reports a committed batch: no statement on the hot path.
    Every ``interval`` seconds the counts go to the ``throughput`` table in one
    statement, added to what other processes wrote for the same minutes. A write that
    fails keeps the counts for the next one; a crash loses at most the counts of the
    last ``interval``. Outcomes the guard dropped (a stale lease) are not counted.
    """

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection[Any]], schema: str, *, interval: float
    ) -> None:
        self._pool = pool
        self._schema = schema
        self.interval = interval
        self.tally = Tally()
        self._write_task: asyncio.Task[int] | None = None

    def committed(
        self, items: Sequence[tuple[Outcome, AttemptState]], written: Collection[int]
    ) -> None:
        """Count the outcomes of ``items`` whose job id is in ``written`` (the ones a
        finalize batch wrote; a stale attempt's outcome matched nothing)."""
        if not written:
            return
        counts: dict[tuple[str, str, str], int] = {}
        for outcome, state in items:
            event = OUTCOME_EVENTS.get(outcome.event)
            if event is not None and outcome.job_id in written:
                key = (state.row.queue, state.kind, event)
                counts[key] = counts.get(key, 0) + 1
        minute = minute_of(datetime.now(UTC))
        for (queue, kind, event), n in counts.items():
            self.tally.add(queue, kind, event, n, minute=minute)

    def resolved(self, outcome: Outcome, row: JobRow) -> None:
        """Count a callback resolution this process committed."""
        event = OUTCOME_EVENTS.get(outcome.event)
        if event is not None:
            self.tally.add(row.queue, row.kind, event)

    def rescued(self, rows: Sequence[tuple[JobRow, str]]) -> None:
        """Count the attempts this process's maintenance rescued."""
        minute = minute_of(datetime.now(UTC))
        for row, _reason in rows:
            self.tally.add(row.queue, row.kind, "rescued", minute=minute)

    async def flush(self) -> int:
        """Write the counts so far; returns how many (minute, queue, kind, event) rows.

        The write runs on in its own task when the caller is cancelled (the worker's
        shutdown cancels the periodic flush): a cancel that arrived while the server was
        committing the counts must not put them back to be written a second time. A write
        that fails puts them back for the next flush.
        """
        await self.settled()
        counts = self.tally.take()
        if not counts:
            return 0
        write = asyncio.create_task(self._write(counts))
        write.add_done_callback(_retrieved)
        self._write_task = write
        return await asyncio.shield(write)

    async def settled(self) -> None:
        """Return once no write is under way (one a cancelled flush left running)."""
        write = self._write_task
        if write is not None and not write.done():
            await asyncio.wait([write])

    async def _write(self, counts: dict[Key, int]) -> int:
        try:
            async with self._pool.connection() as conn:
                await maintenance_db.throughput_add(conn, self._schema, counts)
        except BaseException:
            self.tally.restore(counts)
            raise
        return len(counts)

    async def run_forever(self) -> None:
        """Flush every ``interval`` seconds until cancelled; a failed flush is retried."""
        await repeat("throughput", self.flush, interval=self.interval, sleep_first=True)

    async def close(self) -> None:
        """The last flush, at shutdown: its failure is logged, never raised."""
        try:
            await self.flush()
        except Exception as exc:
            logger.warning("wai: throughput counts of this process not written: %r", exc)


def _retrieved(task: asyncio.Task[int]) -> None:
    """A write whose flush was cancelled has no caller to raise to: its failure (counts
    put back, written by the next flush) is consumed here, not reported by asyncio."""
    if not task.cancelled():
        task.exception()
