"""Fresh statistics for the jobs table, so that the prepared hot statements keep good plans."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai.maintenance import _queries as maintenance_db
from wai.maintenance._service import PeriodicService

__all__ = ["Analyzer", "AnalyzerResult", "needs_analyze"]

logger = logging.getLogger("wai.maintenance")

#: Changes since the last analyze that are always worth a new one, whatever the table's size.
MIN_CHANGES = 1000
#: Beyond that, the share of the table that must have changed.
CHANGED_SHARE = 0.5
#: Seconds: autovacuum analyzed the table this recently, so it keeps up (it looks at each
#: table once a minute with default settings, ``autovacuum_naptime``).
AUTOVACUUM_RECENT = 180.0
#: Seconds an ANALYZE waits for the table's lock before it leaves the pass to the next.
LOCK_WAIT = 0.05


def needs_analyze(reltuples: float, changed: int, autoanalyzed_ago: float | None = None) -> bool:
    """Whether the jobs table changed enough since its last analyze to analyze it again.

    ``reltuples`` is what the planner believes the table holds (-1: never analyzed),
    ``changed`` the rows inserted, updated or deleted since, ``autoanalyzed_ago`` the
    seconds since autovacuum last analyzed it (None: never). While autovacuum analyzed it
    within :data:`AUTOVACUUM_RECENT`, never: it keeps the statistics fresh (after 10 %
    of the table plus 50 rows changed, with default settings), and on a busy queue the
    changes between two of its visits always exceed half the table, so an ANALYZE of
    ours would run at every pass and take the lock its next vacuum needs (autovacuum
    skips a table it cannot lock at once, and comes back a minute later).
    """
    if autoanalyzed_ago is not None and autoanalyzed_ago < AUTOVACUUM_RECENT:
        return False
    return changed >= max(MIN_CHANGES, CHANGED_SHARE * max(reltuples, 0.0))


@dataclass(frozen=True, slots=True)
class AnalyzerResult:
    """One pass: the statistics it found and whether it analyzed the table.

    ``autoanalyzed_ago``: seconds since autovacuum last analyzed the table (None: never).
    ``analyzed`` is False also when the table was needed and another session held it
    (a vacuum, say) for more than :data:`LOCK_WAIT`: the next pass tries again.
    """

    reltuples: float
    changed: int
    analyzed: bool
    autoanalyzed_ago: float | None = None


class Analyzer(PeriodicService):
    """ANALYZEs the jobs table when it has changed a lot since its last analyze.

    The claim, outcome and heartbeat statements run prepared, and PostgreSQL may keep
    one generic plan per statement, made from the statistics of the moment. Made
    while the table was nearly empty, that plan reads the whole table, and keeps
    doing so as the table grows until new statistics invalidate it. Autovacuum's
    analyze normally provides them; on a server where it is off or far behind, this
    service does, every ``interval`` seconds at most (see :func:`needs_analyze`),
    waiting at most :data:`LOCK_WAIT` behind a vacuum of the table. A role that may
    not analyze the table is told once, in the log.
    """

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection[Any]], schema: str, *, interval: float
    ) -> None:
        super().__init__(pool, schema, interval=interval)
        self._refused = False

    async def run_once(self) -> AnalyzerResult:
        """Look at the statistics, and analyze the table if they are stale."""
        async with self._pool.connection() as conn:
            reltuples, changed, auto = await maintenance_db.jobs_table_stats(conn, self._schema)
            if self._refused or not needs_analyze(reltuples, changed, auto):
                return AnalyzerResult(reltuples, changed, analyzed=False, autoanalyzed_ago=auto)
            try:
                ran = await maintenance_db.jobs_table_analyze(
                    conn, self._schema, lock_wait=LOCK_WAIT
                )
            except psycopg.errors.InsufficientPrivilege as exc:
                self._refused = True
                logger.warning(
                    "wai: cannot ANALYZE %s.jobs (%s); its statistics are left to autovacuum",
                    self._schema,
                    exc,
                )
                return AnalyzerResult(reltuples, changed, analyzed=False, autoanalyzed_ago=auto)
        return AnalyzerResult(reltuples, changed, analyzed=ran, autoanalyzed_ago=auto)
