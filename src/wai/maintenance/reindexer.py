"""Index space given back after a long-held snapshot: bloated indexes of the jobs table rebuilt."""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool

from wai.maintenance import _queries as maintenance_db
from wai.maintenance._service import PeriodicService

__all__ = ["Reindexer", "ReindexerResult", "after_hold_floor", "expected_bytes", "needs_rebuild"]

logger = logging.getLogger("wai.maintenance")

#: An index smaller than this (bytes) is never rebuilt, however empty: a rebuild scans the
#: whole table, which is not worth a few megabytes.
MIN_BYTES = 32 * 1024 * 1024
#: After a held snapshot, an index this small (bytes) or more may be rebuilt too, as long as
#: it is also at least a :data:`HEAP_SHARE`-th of the table's heap: the snapshot made it
#: grow and nothing else will shrink it, and a rebuild then scans a heap that vacuum has
#: just truncated back.
AFTER_HOLD_MIN_BYTES = 1024 * 1024
#: See :data:`AFTER_HOLD_MIN_BYTES`: a rebuild scans the heap twice; after a hold, an index
#: is worth it when it is at least this fraction (1/n) of the heap.
HEAP_SHARE = 16
#: Seconds the sweep after a held snapshot lasts: the heap may be truncated only by a later
#: vacuum than the one the rebuilds waited for (truncation gives up behind a lock), and its
#: size sets the sweep's floor.
SWEEP = 600.0
#: How many times its expected size an index must be before it is rebuilt.
BLOAT_FACTOR = 4.0
#: The share of its pages' space a btree's entries fill, for the expected size: half,
#: where a freshly built one fills nine tenths, so that ordinary churn never looks bloated.
FILL = 0.5
#: The shortest time between two rebuilds of one index (seconds): an index whose working
#: size is large by nature is rebuilt at most this often.
SPACING = 1800.0
#: Seconds: while a transaction of the database is older than this, nothing is rebuilt (a
#: rebuild waits for every snapshot older than itself, and vacuum has not removed what
#: such a snapshot still sees, so the new index would hold it too).
OLD_TRANSACTION = 60.0
#: Seconds each lock wait of a rebuild or drop may take before it gives up.
LOCK_WAIT = 5.0
#: Seconds from a rebuild to the next pass while more indexes wait for one.
NEXT_SOON = 1.0
#: What REINDEX CONCURRENTLY names the index it builds, and the old one before it drops
#: it; an interrupted rebuild leaves them behind, invalid.
_LEFTOVER = re.compile(r"_cc(?:new|old)[0-9]*$")


def expected_bytes(entries: float, entry_bytes: float) -> float:
    """The size an index of ``entries`` entries of about ``entry_bytes`` each may reach
    in ordinary use: its pages counted half full (:data:`FILL`), plus its metapage and
    root (pure)."""
    return 2 * 8192 + max(entries, 0.0) * entry_bytes / FILL


def needs_rebuild(
    size: int, entries: float, entry_bytes: float, *, min_bytes: int = MIN_BYTES
) -> bool:
    """Whether an index of ``size`` bytes holding ``entries`` entries (reltuples, as the
    last vacuum or analyze counted them) of about ``entry_bytes`` each should be rebuilt
    to give its space back: at least ``min_bytes`` and :data:`BLOAT_FACTOR` times its
    expected size (pure).

    The entries are what the last vacuum or analyze counted (an analyze counts the live
    rows an index covers): while a snapshot is held they may already look few, which is
    why :class:`Reindexer` also waits for old transactions and the vacuum after them.
    """
    return size >= min_bytes and size > BLOAT_FACTOR * expected_bytes(entries, entry_bytes)


def after_hold_floor(min_bytes: int, after_hold_min_bytes: int, heap_bytes: int) -> int:
    """The least size (bytes) of an index rebuilt in the sweep after a held snapshot: the
    larger of ``after_hold_min_bytes`` and a :data:`HEAP_SHARE`-th of the table's heap, never
    above the usual ``min_bytes`` (pure)."""
    return min(min_bytes, max(after_hold_min_bytes, heap_bytes // HEAP_SHARE))


@dataclass(frozen=True, slots=True)
class ReindexerResult:
    """One pass: the index rebuilt (if any) with its size before and after, the leftovers
    of interrupted rebuilds dropped, and why nothing was rebuilt when something could have
    been (``"old transaction"``, ``"vacuum pending"``, ``"lock wait"``, ``"spaced"``,
    ``"no session"``; None otherwise)."""

    rebuilt: str | None = None
    before: int = 0
    after: int = 0
    dropped: list[str] = field(default_factory=list[str])
    skipped: str | None = None


class Reindexer(PeriodicService):
    """Rebuilds an index of the jobs table that holds far more pages than entries.

    The known way a held snapshot hurts a Postgres queue outlasts it: vacuum can remove
    nothing while it is held, every job leaves several index entries, and the indexes grow
    to hold them all. Once it is released vacuum empties those pages, but a btree never
    gives pages back to the file system: the indexes stay at the size the snapshot made
    them, for good. Every ``interval`` seconds the leader looks at the indexes' sizes and,
    for the one furthest past :func:`needs_rebuild`, runs ``REINDEX INDEX CONCURRENTLY``
    (writes go on meanwhile; the table is scanned twice), one index a pass, each at most
    once every :data:`SPACING` seconds (the next pass comes :data:`NEXT_SOON` after a
    rebuild while others wait for theirs), never while a transaction older than
    :data:`OLD_TRANSACTION` is open in the database nor, once one was seen, before a
    vacuum of the table that began after it ended has ended too (until then a rebuild
    scans every row the snapshot kept), each lock wait bounded by
    :data:`LOCK_WAIT`. Once that vacuum has ended, for ``sweep`` seconds (:data:`SWEEP`)
    smaller bloated indexes are rebuilt too, down to :func:`after_hold_floor` (1 MiB and a
    16th of the heap by default): the held snapshot made them grow, ordinary churn would
    not have. An interrupted rebuild
    leaves an invalid ``<index>_ccnew`` (or ``_ccold``) index behind, which the next pass
    drops. A role that may not rebuild the indexes (it does not own the table) is told
    once, in the log.

    Rebuilds and drops run on a connection of their own, to ``url`` (the runtime's
    ``listen_url``: a session, not a transaction-mode pooler), opened for the pass with
    ``lock_timeout`` in its startup options and closed after it, so that no setting
    outlives it and no pooled connection is held for the length of a rebuild.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        interval: float,
        min_bytes: int = MIN_BYTES,
        after_hold_min_bytes: int = AFTER_HOLD_MIN_BYTES,
        sweep: float = SWEEP,
        old_transaction: float = OLD_TRANSACTION,
        spacing: float = SPACING,
        lock_wait: float = LOCK_WAIT,
        url: str | None = None,
    ) -> None:
        super().__init__(pool, schema, interval=interval)
        self._url = url if url is not None else str(pool.conninfo)
        self._unreachable = False
        # Whether a pass saw an old transaction whose kept rows no vacuum has removed yet,
        # how many vacuums of the table had ended at the first pass after it, and until
        # when (monotonic) the sweep of smaller indexes after it lasts.
        self._held = False
        self._vacuums_then: int | None = None
        self._sweep = sweep
        self._sweep_until = -math.inf
        self._min_bytes = min_bytes
        self._after_hold_min_bytes = after_hold_min_bytes
        self._old_transaction = old_transaction
        self._spacing = spacing
        self._lock_wait = lock_wait
        self._rebuilt_at: dict[str, float] = {}
        self._refused = False
        self._next_wait = interval

    def next_wait(self) -> float:
        """Seconds from the end of a pass to the next: :data:`NEXT_SOON` after a rebuild
        that left another index waiting for one, else ``interval``."""
        return self._next_wait

    async def run_once(self) -> ReindexerResult:
        """Drop the leftovers of interrupted rebuilds, then rebuild the most bloated index."""
        if self._refused:
            return ReindexerResult()
        try:
            return await self._pass()
        except psycopg.errors.InsufficientPrivilege as exc:
            self._refused = True
            logger.warning(
                "wai: cannot rebuild the indexes of %s.jobs (%s); their space after a "
                "long-held snapshot is left to an operator's REINDEX",
                self._schema,
                exc,
            )
            return ReindexerResult()

    async def _session(self) -> AsyncConnection[Any] | None:
        """A connection of the pass's own, its lock waits bounded; None when it cannot
        be opened (said in the log at WARNING the first time, at DEBUG after)."""
        params = conninfo_to_dict(self._url)
        bound = f"-c lock_timeout={max(1, round(self._lock_wait * 1000))}"
        options = params.get("options")
        params["options"] = f"{options} {bound}" if options else bound
        try:
            return await AsyncConnection.connect(make_conninfo("", **params), autocommit=True)
        except psycopg.OperationalError as exc:
            level = logging.DEBUG if self._unreachable else logging.WARNING
            self._unreachable = True
            logger.log(
                level,
                "wai: cannot open a session to rebuild the indexes of %s.jobs (%s); "
                "tried again at the next pass",
                self._schema,
                exc,
            )
            return None

    def _follow_snapshot(self, age: float, vacuums: int) -> str | None:
        """Why nothing may be rebuilt now (``"old transaction"``, ``"vacuum pending"``), or
        None; starts the sweep of smaller indexes once a held snapshot's rows are gone.

        ``age``: seconds since the oldest open transaction began; ``vacuums``: how many
        vacuums of the table have ended.
        """
        if age > self._old_transaction:
            self._held = True
            self._vacuums_then = None
            self._sweep_until = -math.inf
            return "old transaction"
        if not self._held:
            return None
        # The rows the snapshot kept are still in the table until a vacuum that began after
        # it ended: the first vacuum to end from here may have begun before (and removed
        # nothing), the second began after. A rebuild before would scan them all.
        if self._vacuums_then is None or vacuums < self._vacuums_then:
            # The first pass since, or the table's statistics were reset (the count went
            # back): count the vacuums from here.
            self._vacuums_then = vacuums
        if vacuums < self._vacuums_then + 2:
            return "vacuum pending"
        self._held = False
        self._sweep_until = time.monotonic() + self._sweep
        return None

    async def _pass(self) -> ReindexerResult:
        self._next_wait = self.interval
        async with self._pool.connection() as conn:
            indexes = await maintenance_db.jobs_index_sizes(conn, self._schema)
            age, vacuums, heap = await maintenance_db.jobs_rebuild_state(conn, self._schema)
        leftovers = [n for n, valid, _, _, _ in indexes if not valid and _LEFTOVER.search(n)]
        waiting = self._follow_snapshot(age, vacuums)
        now = time.monotonic()
        floor = self._min_bytes
        if waiting is not None or now < self._sweep_until:
            floor = after_hold_floor(self._min_bytes, self._after_hold_min_bytes, heap)
        candidates = [
            (size - expected_bytes(entries, width), name, size)
            for name, valid, size, entries, width in indexes
            if valid and needs_rebuild(size, entries, width, min_bytes=floor)
        ]
        due = [
            c
            for c in candidates
            if now - self._rebuilt_at.get(c[1], -self._spacing) >= self._spacing
        ]
        if waiting is not None and due:
            skipped: str | None = waiting
            due = []
        else:
            skipped = "spaced" if candidates else None
        if not leftovers and not due:
            return ReindexerResult(skipped=skipped)
        session = await self._session()
        if session is None:
            return ReindexerResult(skipped="no session")
        async with session:
            dropped: list[str] = []
            for name in leftovers:
                try:
                    await maintenance_db.jobs_index_drop(session, self._schema, name)
                except psycopg.errors.LockNotAvailable:
                    continue
                dropped.append(name)
            if not due:
                return ReindexerResult(dropped=dropped, skipped=skipped)
            _, name, before = max(due)
            self._rebuilt_at[name] = now
            began = time.monotonic()
            try:
                await maintenance_db.jobs_index_rebuild(session, self._schema, name)
            except psycopg.errors.LockNotAvailable:
                return ReindexerResult(dropped=dropped, skipped="lock wait")
            took = time.monotonic() - began
            after = next(
                (
                    size
                    for n, _, size, _, _ in await maintenance_db.jobs_index_sizes(
                        session, self._schema
                    )
                    if n == name
                ),
                0,
            )
        if len(due) > 1:
            self._next_wait = min(NEXT_SOON, self.interval)
        logger.info(
            "wai: rebuilt index %s.%s in %.1f s: %.1f MiB -> %.1f MiB",
            self._schema,
            name,
            took,
            before / 2**20,
            after / 2**20,
        )
        return ReindexerResult(rebuilt=name, before=before, after=after, dropped=dropped)
