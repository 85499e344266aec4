"""The outbox sweeper: dispatches follow-ups of transitions made without user code."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai import _db_async as db
from wai import _producer_async as producer
from wai._text import storable
from wai.errors import FollowUpError, SerializationError, WaiError
from wai.followups import decode_for, evaluate
from wai.job import JobRow
from wai.maintenance._service import PeriodicService
from wai.registry import Registry

__all__ = ["OutboxSweeper", "SweepResult"]

logger = logging.getLogger("wai.maintenance")


@dataclass(frozen=True, slots=True)
class SweepResult:
    """Outbox rows dispatched and rows whose dispatch failed (and will be retried)."""

    dispatched: int
    failed: int


class OutboxSweeper(PeriodicService):
    """Runs in every process whose registry has specs; not leader-gated.

    For each due outbox row of a (kind, outcome) it holds specs for, one
    transaction locks the row (``SKIP LOCKED``, so sweepers never collide), runs
    the closures, inserts the follow-ups the lineage says are still missing, and
    deletes the row. A failing closure rolls that back; the row records the error
    and is retried with backoff, visible to operators meanwhile.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        registry: Registry,
        *,
        interval: float,
        batch_size: int = 100,
    ) -> None:
        super().__init__(pool, schema, interval=interval)
        self._registry = registry
        self._batch_size = batch_size

    async def run_once(self) -> SweepResult:
        """Dispatch due rows until none is left (or a bounded number of passes ran)."""
        pairs = sorted(self._registry.specs)
        dispatched = failed = 0
        if not pairs:
            return SweepResult(0, 0)
        for _ in range(10):
            done, bad, seen = await self._sweep(pairs)
            dispatched += done
            failed += bad
            if seen < self._batch_size:
                break
        return SweepResult(dispatched, failed)

    async def _sweep(self, pairs: list[tuple[str, str]]) -> tuple[int, int, int]:
        done = bad = seen = 0
        async with self._pool.connection() as conn:
            while seen < self._batch_size:
                async with conn.transaction():
                    rows = await db.outbox_lock_due(conn, self._schema, pairs=pairs, limit=1)
                    if not rows:
                        break
                    row = rows[0]
                    seen += 1
                    try:
                        async with conn.transaction():  # a savepoint: undone on failure
                            await self._dispatch(conn, row)
                        done += 1
                    except WaiError as exc:
                        bad += 1
                        error = storable(str(exc))  # a closure's message may hold NUL
                        logger.warning(
                            "wai: outbox row %s (job %s, %s) failed: %s; retrying later",
                            row["id"],
                            row["job_id"],
                            row["outcome"],
                            error,
                        )
                        await db.outbox_backoff(
                            conn, self._schema, outbox_id=row["id"], error=error
                        )
        return done, bad, seen

    async def _dispatch(self, conn: AsyncConnection[Any], row: dict[str, Any]) -> None:
        job = JobRow.from_json(row["job"])
        outcome: str = row["outcome"]
        specs = self._registry.specs_for(row["kind"], outcome)
        already = await db.outbox_dispatched_specs(
            conn, self._schema, job_id=row["job_id"], run_lease=row["run_lease"], outcome=outcome
        )
        todo = [s for s in specs if s.name not in already]
        if todo:
            try:
                args = decode_for(self._registry, job)
            except SerializationError as exc:
                raise FollowUpError(
                    f"follow-ups of job {job.id}: args do not decode: {exc}"
                ) from exc
            detail: dict[str, Any] = row["detail"] or {}
            new = [
                evaluate(
                    s,
                    args,
                    job,
                    detail,
                    default_queue=self._registry.queue_of,
                    default_max_attempts=self._registry.max_attempts_of,
                )
                for s in todo
            ]
            await producer.insert_followups(conn, self._schema, new)
        await db.outbox_delete(conn, self._schema, outbox_id=row["id"])
