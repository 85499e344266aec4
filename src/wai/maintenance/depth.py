"""Samples of every queue's depth over time, for the dashboard's charts of the last hour;
and the retention of those samples and of the throughput counts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai import _db_async as db
from wai.maintenance import _queries as maintenance_db
from wai.maintenance._service import SCAN_SHARE, PeriodicService

__all__ = ["DEPTH_RETENTION", "DepthResult", "DepthSampler"]

#: How long depth samples are kept, in seconds: a day.
DEPTH_RETENTION = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class DepthResult:
    """One pass: how many queues were sampled, how many old samples and throughput rows
    were deleted."""

    queues: int
    deleted: int
    throughput_deleted: int = 0


class DepthSampler(PeriodicService):
    """Records the live counts and lag of every queue every ``interval`` seconds.

    Run by the maintenance leader only, so one sample a pass for the whole database. A
    sample holds, per queue with unfinished jobs or a row in the queues table, the exact
    count of its jobs in each unfinished state and the lag of its oldest available job:
    the same figures as :meth:`wai.AsyncClient.queue_stats`, read from the live rows
    only, so a pass costs the same over a million finished jobs as over none. Samples,
    and the per-minute throughput counts the workers write, older than
    :data:`DEPTH_RETENTION` are deleted in the same pass.
    """

    #: A sample counts every unfinished row: spaced out while that is slow.
    share = SCAN_SHARE

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        interval: float,
        retention: float = DEPTH_RETENTION,
    ) -> None:
        super().__init__(pool, schema, interval=interval)
        self._retention = retention

    async def run_once(self) -> DepthResult:
        """Take one sample and forget the expired ones."""
        async with self._pool.connection() as conn:
            live = await db.queue_live_counts(conn, self._schema)
            if live:
                await maintenance_db.depth_record(conn, self._schema, live)
            deleted = await maintenance_db.depth_delete_old(conn, self._schema, self._retention)
            counts = await maintenance_db.throughput_delete_old(conn, self._schema, self._retention)
        return DepthResult(queues=len(live), deleted=deleted, throughput_deleted=counts)
