"""Retention cleanup: expired terminal jobs, orphaned outbox rows and DLQ entries, in batches."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai.dlq import _queries_async as dlq_db
from wai.maintenance import _queries as maintenance_db
from wai.maintenance._service import PeriodicService

__all__ = ["MIN_WAIT", "Cleaner", "CleanerResult", "next_cleanup_wait"]

#: The shortest wait between two cleanup passes (seconds; at most the interval).
MIN_WAIT = 1.0


def next_cleanup_wait(
    deleted: int, elapsed: float, *, more: bool, batch_size: int, interval: float
) -> float:
    """Seconds until the next cleanup pass, from what this one deleted (pure).

    ``deleted`` jobs went in this pass, ``elapsed`` seconds after the previous pass
    began (the span they expired in); ``more``: the pass stopped at its budget with a
    full last batch, so rows are left. The next pass comes when about one batch will
    have expired at that rate, so a steady flow of expiring jobs is deleted a batch or
    a few at a time rather than all at once every ``interval`` (a minute of jobs at
    thousands a second is a burst of writes that every commit of the queue waits
    behind); never sooner than :data:`MIN_WAIT`, never later than ``interval``.
    """
    floor = min(MIN_WAIT, interval)
    if more:
        return floor
    if deleted <= 0 or elapsed <= 0:
        return interval
    return min(interval, max(floor, batch_size * elapsed / deleted))


class _Expire(Protocol):
    async def __call__(
        self, conn: AsyncConnection[Any], schema: str, *, retention: float, limit: int
    ) -> int: ...


@dataclass(frozen=True, slots=True)
class CleanerResult:
    """Jobs deleted in one pass, per state (``completed``, ``failed``, ``cancelled``).

    ``outbox`` counts the orphaned outbox rows deleted past the outbox retention, ``dlq``
    the dead-letter entries deleted past theirs.
    """

    deleted: dict[str, int] = field(default_factory=dict[str, int])
    outbox: int = 0
    dlq: int = 0


class Cleaner(PeriodicService):
    """Deletes ``completed``, ``failed`` and ``cancelled`` jobs past their retention.

    Passes run every ``interval`` seconds while few jobs expire, and sooner while many
    do (:func:`next_cleanup_wait`: about one batch a pass, at least :data:`MIN_WAIT`
    apart); outbox and dead-letter retention run at most once an ``interval``.

    A job's age is counted from ``finalized_at``. The retention of its state is
    the queue's override in the ``queues`` table (``completed_retention``,
    ``failed_retention``, ``cancelled_retention``; NULL means the default) or
    else *completed*, *failed*, *cancelled* (seconds). Rows are deleted
    ``batch_size`` at a time, each batch its own short transaction, until none is
    left or for at most ``budget`` seconds a pass (and ``max_batches`` batches), so
    no statement runs long and a pass keeps up with a queue that finishes thousands
    of jobs a second (a cap of 32 batches a pass once limited it to about 533 jobs/s
    with the default 60-s interval); a bigger backlog is worked off over several
    passes. Non-terminal jobs are never touched.

    Orphaned outbox rows created longer than *outbox* seconds ago are deleted
    the same way: rows of a kind and outcome no process ever registered a spec for
    (``followup_specs``, recorded by every runtime at start) and no sweeper ever
    tried, so they hold no follow-up to dispatch (a rescue, an admin cancel or a
    callback resolution by a process without the registry leaves one for every
    job). An outbox row that some process registered specs for, or that
    failed (pending with attempts, or failed), is never deleted by retention: it
    waits for a sweeper or for an operator (``wai outbox retry|discard``). Rows a
    sweeper holds are skipped.
    So are dead-letter entries older than their queue's ``dlq_retention`` (the
    ``queues`` table) or else *dlq* seconds, counted from when they entered.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        interval: float,
        completed: float,
        failed: float,
        cancelled: float,
        outbox: float = 7 * 24 * 3600.0,
        dlq: float = 30 * 24 * 3600.0,
        batch_size: int = 1000,
        max_batches: int = 10_000,
        budget: float = 10.0,
    ) -> None:
        super().__init__(pool, schema, interval=interval)
        self._budget = budget
        self._completed = completed
        self._failed = failed
        self._cancelled = cancelled
        self._outbox = outbox
        self._dlq = dlq
        self._batch_size = batch_size
        self._max_batches = max_batches
        self._began: float | None = None  # when the previous pass began
        self._expired_at: float | None = None  # when outbox and DLQ retention last ran
        self._swept_at: float | None = None  # when a pass last started at the oldest row
        self._mark: datetime | None = None  # the latest finalized_at the last pass deleted
        self._next_wait = interval

    def next_wait(self) -> float:
        """Seconds from the end of the last pass to the next (:func:`next_cleanup_wait`)."""
        return self._next_wait

    async def run_once(self) -> CleanerResult:
        """Delete expired terminal jobs, orphaned outbox rows and dead-letter entries.

        Jobs from the latest ``finalized_at`` the previous pass deleted, and from the
        oldest when the last pass that did is an ``interval`` ago or more (or none did).
        Outbox rows and dead-letter entries only when the last pass that expired them
        is an ``interval`` ago or more (or none did).
        """
        began = time.monotonic()
        elapsed = self.interval if self._began is None else began - self._began
        self._began = began
        total: dict[str, int] = {}
        more = False
        until = began + self._budget
        # Each batch starts where the previous one ended, and each pass where the last
        # one did, not at the oldest entry of jobs_finalized_idx: the entries of the rows
        # deleted stay until vacuum, and for as long as an old snapshot is held, so a
        # pass from the oldest walks every row deleted since that snapshot began. Rows
        # left behind (a longer retention, locked, a finalized_at older than the mark
        # committed after it was taken) wait for the next pass from the oldest, at most
        # one interval later.
        after = self._mark
        if self._swept_at is None or began - self._swept_at >= self.interval:
            self._swept_at = began
            after = None
        for _ in range(self._max_batches):
            async with self._pool.connection() as conn:
                batch, last = await maintenance_db.job_delete_finalized(
                    conn,
                    self._schema,
                    completed=self._completed,
                    failed=self._failed,
                    cancelled=self._cancelled,
                    limit=self._batch_size,
                    after=after,
                )
            after = last if last is not None else after
            for state, n in batch.items():
                total[state] = total.get(state, 0) + n
            if sum(batch.values()) < self._batch_size:
                break
            if time.monotonic() > until:
                more = True
                break
        else:
            more = True
        self._mark = after
        self._next_wait = next_cleanup_wait(
            sum(total.values()),
            elapsed,
            more=more,
            batch_size=self._batch_size,
            interval=self.interval,
        )
        outbox = dead = 0
        if self._expired_at is None or began - self._expired_at >= self.interval:
            self._expired_at = began
            outbox = await self._expire(maintenance_db.outbox_delete_expired, self._outbox)
            dead = await self._expire(dlq_db.dlq_delete_expired, self._dlq)
        return CleanerResult(total, outbox, dead)

    async def _expire(self, delete: _Expire, retention: float) -> int:
        done = 0
        until = time.monotonic() + self._budget
        for _ in range(self._max_batches):
            async with self._pool.connection() as conn:
                n = await delete(conn, self._schema, retention=retention, limit=self._batch_size)
            done += n
            if n < self._batch_size or time.monotonic() > until:
                break
        return done
