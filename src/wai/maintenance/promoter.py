"""Promotion: due scheduled and retryable jobs become available."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai.maintenance import _queries as maintenance_db
from wai.maintenance._service import PeriodicService

__all__ = ["Promoter", "PromoterResult"]


@dataclass(frozen=True, slots=True)
class PromoterResult:
    """Jobs promoted in one pass, per queue."""

    promoted: dict[str, int]


class Promoter(PeriodicService):
    """Moves due ``scheduled``/``retryable`` jobs to ``available`` and NOTIFYs their queues."""

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        interval: float,
        batch_size: int = 4096,
    ) -> None:
        super().__init__(pool, schema, interval=interval)
        self._batch_size = batch_size

    async def run_once(self) -> PromoterResult:
        """Promote due jobs, in batches, until none is left or 32 batches ran."""
        total: dict[str, int] = {}
        # Short statements, and a bounded pass: a bigger backlog is left to the next passes.
        for _ in range(32):
            async with self._pool.connection() as conn:
                batch = await maintenance_db.job_promote_due(conn, self._schema, self._batch_size)
            for queue, n in batch.items():
                total[queue] = total.get(queue, 0) + n
            if sum(batch.values()) < self._batch_size:
                break
        return PromoterResult(total)
