"""Priority aging: jobs that wait long in an aging queue move up in claim order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai.maintenance import _queries as maintenance_db
from wai.maintenance._service import SCAN_SHARE, PeriodicService

__all__ = ["Aging", "AgingResult"]


@dataclass(frozen=True, slots=True)
class AgingResult:
    """Jobs whose priority changed in one pass, per queue."""

    aged: dict[str, int] = field(default_factory=dict[str, int])


class Aging(PeriodicService):
    """Lowers the priority number of ``available`` jobs that waited long, in aging queues.

    Only queues whose ``priority_aging`` interval is set in the ``queues`` table
    (``QueueConfig(priority_aging=...)``) are touched. A job's priority becomes
    ``original - floor(waited / priority_aging)``, at least 1, where *waited*
    is counted from ``run_at`` and *original* is the priority it had before the
    first change, kept in ``metadata["wai.original_priority"]``. The result does
    not depend on how often the pass runs: a second pass within the same
    interval changes nothing.
    """

    #: Aging reads the available rows of aging queues: spaced out while that is slow.
    share = SCAN_SHARE

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        interval: float,
        batch_size: int = 1000,
        max_batches: int = 32,
    ) -> None:
        super().__init__(pool, schema, interval=interval)
        self._batch_size = batch_size
        self._max_batches = max_batches

    async def run_once(self) -> AgingResult:
        """Age due jobs in batches until none is left or the pass is full."""
        total: dict[str, int] = {}
        # Short statements, and a bounded pass: a bigger backlog is left to the next passes.
        for _ in range(self._max_batches):
            async with self._pool.connection() as conn:
                batch = await maintenance_db.job_age_priority(conn, self._schema, self._batch_size)
            for queue, n in batch.items():
                total[queue] = total.get(queue, 0) + n
            if sum(batch.values()) < self._batch_size:
                break
        return AgingResult(total)
