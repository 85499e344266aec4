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


def needs_analyze(reltuples: float, changed: int) -> bool:
    """Whether the jobs table changed enough since its last analyze to analyze it again.

    ``reltuples`` is what the planner believes the table holds (-1: never analyzed),
    ``changed`` the rows inserted, updated or deleted since. Autovacuum analyzes
    after 10 % (plus 50 rows) with default settings, so where it runs this rarely fires.
    """
    return changed >= max(MIN_CHANGES, CHANGED_SHARE * max(reltuples, 0.0))


@dataclass(frozen=True, slots=True)
class AnalyzerResult:
    """One pass: the statistics it found and whether it analyzed the table."""

    reltuples: float
    changed: int
    analyzed: bool


class Analyzer(PeriodicService):
    """ANALYZEs the jobs table when it has changed a lot since its last analyze.

    The claim, outcome and heartbeat statements run prepared, and PostgreSQL may keep
    one generic plan per statement, made from the statistics of the moment. Made
    while the table was nearly empty, that plan reads the whole table, and keeps
    doing so as the table grows until new statistics invalidate it. Autovacuum's
    analyze normally provides them; on a server where it is off or far behind, this
    service does, every ``interval`` seconds at most (see :func:`needs_analyze`).
    A role that may not analyze the table is told once, in the log.
    """

    def __init__(
        self, pool: AsyncConnectionPool[AsyncConnection[Any]], schema: str, *, interval: float
    ) -> None:
        super().__init__(pool, schema, interval=interval)
        self._refused = False

    async def run_once(self) -> AnalyzerResult:
        """Look at the statistics, and analyze the table if they are stale."""
        async with self._pool.connection() as conn:
            reltuples, changed = await maintenance_db.jobs_table_stats(conn, self._schema)
            if self._refused or not needs_analyze(reltuples, changed):
                return AnalyzerResult(reltuples, changed, analyzed=False)
            try:
                await maintenance_db.jobs_table_analyze(conn, self._schema)
            except psycopg.errors.InsufficientPrivilege as exc:
                self._refused = True
                logger.warning(
                    "wai: cannot ANALYZE %s.jobs (%s); its statistics are left to autovacuum",
                    self._schema,
                    exc,
                )
                return AnalyzerResult(reltuples, changed, analyzed=False)
        return AnalyzerResult(reltuples, changed, analyzed=True)
