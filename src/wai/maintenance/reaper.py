"""Collection of runtime records left behind by processes that died without cleaning up."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai.maintenance import _queries as maintenance_db
from wai.maintenance._service import PeriodicService

__all__ = ["InstanceReaper", "InstanceReaperResult"]

#: A record is never collected sooner than this many seconds after it was last refreshed.
MIN_AGE = 30.0


@dataclass(frozen=True, slots=True)
class InstanceReaperResult:
    """Instance ids whose records were deleted in one pass."""

    deleted: list[str] = field(default_factory=list[str])


class InstanceReaper(PeriodicService):
    """Deletes ``runtime_instances`` rows not refreshed for 3 x their record interval.

    Each process writes its own ``record_interval`` into its health JSON, so a
    slow-recording process is judged by its own cadence; *record_interval* is
    the fallback for rows without one. A row is never collected sooner than
    *min_age* seconds (default 30) after its ``last_seen_at``.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        interval: float,
        record_interval: float,
        min_age: float = MIN_AGE,
    ) -> None:
        super().__init__(pool, schema, interval=interval)
        self._record_interval = record_interval
        self._min_age = min_age

    async def run_once(self) -> InstanceReaperResult:
        """Delete the stale records once."""
        async with self._pool.connection() as conn:
            ids = await maintenance_db.runtime_instance_delete_stale(
                conn,
                self._schema,
                default_interval=self._record_interval,
                min_age=self._min_age,
            )
        return InstanceReaperResult(ids)
