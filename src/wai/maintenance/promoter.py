"""Promotion: due scheduled and retryable jobs become available."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai._pace import IdlePace
from wai.maintenance import _queries as maintenance_db
from wai.maintenance._service import PeriodicService

__all__ = ["Promoter", "PromoterResult"]


@dataclass(frozen=True, slots=True)
class PromoterResult:
    """Jobs promoted in one pass, per queue, and the seconds until the next scheduled or
    retryable job is due by the database clock (None: no job is waiting for its time)."""

    promoted: dict[str, int]
    due_in: float | None = None


class Promoter(PeriodicService):
    """Moves due ``scheduled``/``retryable`` jobs to ``available`` and NOTIFYs their queues.

    With a ``pace`` it sleeps, while idle, until the next job is due (or the idle cap);
    a job that becomes scheduled or retryable meanwhile wakes it (``<schema>.due``).
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        interval: float,
        batch_size: int = 4096,
        pace: IdlePace | None = None,
    ) -> None:
        super().__init__(pool, schema, interval=interval, pace=pace)
        self._batch_size = batch_size

    async def run_once(self) -> PromoterResult:
        """Promote due jobs, in batches, until none is left or 32 batches ran."""
        total: dict[str, int] = {}
        due_in: float | None = None
        # Short statements, and a bounded pass: a bigger backlog is left to the next passes.
        for _ in range(32):
            async with self._pool.connection() as conn:
                batch, due_in = await maintenance_db.job_promote_due(
                    conn, self._schema, self._batch_size
                )
            for queue, n in batch.items():
                total[queue] = total.get(queue, 0) + n
            if sum(batch.values()) < self._batch_size:
                break
        return PromoterResult(total, due_in)

    def idle_state(self, result: object) -> tuple[bool, float | None]:
        """Busy when it promoted a job; next due when the next job's time comes."""
        assert isinstance(result, PromoterResult)
        return bool(result.promoted), result.due_in
