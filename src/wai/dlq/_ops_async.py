"""The dead-letter queue's operations behind the async client (source of the sync client)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from wai._admin import check_job_id
from wai._core_async import AsyncClientCore, translated
from wai._inserts import check_run_at, validate_queue
from wai._job import JobRow
from wai.dlq import _queries_async as dlq_db
from wai.dlq._models import DlqEntry, DlqFilter, check_reason, decode_cursor
from wai.errors import InvalidStateError, JobNotFound, UniqueConflict, ValidationError

__all__ = ["AsyncDlqOps", "Progress"]

#: A bulk action's progress callback: called after each batch with the running total.
Progress = Callable[[int], None]


def _check_limit(name: str, value: object, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ValidationError(f"{name} must be 1..{high}, got {value!r}")
    return value


def _check_target(queue: str | None, priority: int | None, run_at: datetime | None) -> None:
    if queue is not None:
        validate_queue(queue)
    if priority is not None:
        _check_limit("priority", priority, 4)
    if run_at is not None:
        check_run_at(run_at)


class AsyncDlqOps:
    """List, inspect, retry, move and purge dead-lettered jobs.

    Jobs of a queue with the dead-letter queue on leave the jobs table when they
    fail (see :mod:`wai.dlq`). Bulk actions work in batches of ``batch_size``,
    each its own transaction, and call ``on_progress`` with the running total
    after each; they refuse to run without a filter unless ``all=True``.
    """

    def __init__(self, core: AsyncClientCore) -> None:
        self._core = core

    async def list_dlq(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        reason: str | None = None,
        limit: int = 100,
        before: str | None = None,
    ) -> list[DlqEntry]:
        """Dead-lettered jobs, newest first; pass the last entry's ``.cursor`` as ``before``."""
        flt = DlqFilter(queue=queue, kind=kind, tag=tag, reason=reason)
        _check_limit("limit", limit, 10_000)
        after = decode_cursor(before) if before is not None else None
        async with translated(self._core) as conn:
            return await dlq_db.dlq_list(conn, self._core.schema, flt, before=after, limit=limit)

    async def get_dlq_entry(self, job_id: int) -> DlqEntry:
        """The dead-letter entry of job ``job_id``; raises :class:`wai.JobNotFound`."""
        job_id = check_job_id(job_id)
        async with translated(self._core) as conn:
            entry = await dlq_db.dlq_get(conn, self._core.schema, job_id)
        if entry is None:
            raise JobNotFound(f"job {job_id} is not in the dead-letter queue")
        return entry

    async def dlq_depth(self, queue: str | None = None) -> int:
        """How many jobs are dead-lettered, in ``queue`` or in all queues."""
        depths = await self.dlq_depths()
        if queue is not None:
            return depths.get(validate_queue(queue), 0)
        return sum(depths.values())

    async def dlq_depths(self) -> dict[str, int]:
        """Dead-lettered jobs per queue (queues without any are left out)."""
        async with translated(self._core) as conn:
            return await dlq_db.dlq_depth(conn, self._core.schema)

    async def retry_from_dlq(
        self,
        job_id: int,
        *,
        queue: str | None = None,
        priority: int | None = None,
        run_at: datetime | None = None,
    ) -> JobRow:
        """Put a dead-lettered job back to run; returns its row."""
        job_id = check_job_id(job_id)
        _check_target(queue, priority, run_at)
        async with translated(self._core) as conn:
            batch = await dlq_db.dlq_retry(
                conn,
                self._core.schema,
                ids=[job_id],
                limit=1,
                to_queue=queue,
                priority=priority,
                run_at=run_at,
            )
        if batch.restored:
            return batch.restored[0]
        if batch.held:
            raise UniqueConflict(
                f"job {job_id} stays in the dead-letter queue: a live job holds its unique key"
            )
        raise JobNotFound(f"job {job_id} is not in the dead-letter queue")

    async def bulk_retry_from_dlq(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        reason: str | None = None,
        all: bool = False,
        to_queue: str | None = None,
        priority: int | None = None,
        run_at: datetime | None = None,
        batch_size: int = 1000,
        on_progress: Progress | None = None,
    ) -> int:
        """Retry every dead-lettered job matching the filters, oldest first; returns how many."""
        flt = DlqFilter(queue=queue, kind=kind, tag=tag, reason=reason)
        flt.require("bulk_retry_from_dlq", all=all)
        _check_target(to_queue, priority, run_at)
        _check_limit("batch_size", batch_size, 10_000)
        done = 0
        after: tuple[datetime, int] | None = None
        async with translated(self._core) as conn:
            # Only entries there when the call began: a job that fails again is not retried twice.
            until = await dlq_db.db_now(conn, self._core.schema)
        while True:
            async with translated(self._core) as conn:
                batch = await dlq_db.dlq_retry(
                    conn,
                    self._core.schema,
                    flt=flt,
                    after=after,
                    until=until,
                    limit=batch_size,
                    to_queue=to_queue,
                    priority=priority,
                    run_at=run_at,
                )
            done += len(batch.restored)
            # A cursor: entries whose unique key is held stay behind, and are not looked at again.
            after = batch.last
            if on_progress is not None and batch.looked_at:
                on_progress(done)
            if not batch.looked_at:
                return done

    async def move_to_dlq(self, job_id: int, reason: str = "manual") -> DlqEntry:
        """Move a ``failed`` job to the dead-letter queue, whatever its queue's policy."""
        job_id = check_job_id(job_id)
        reason = check_reason(reason)
        async with translated(self._core) as conn, conn.transaction():
            found = await dlq_db.dlq_move_one(conn, self._core.schema, job_id, reason)
            entry = await dlq_db.dlq_get(conn, self._core.schema, job_id)
        if found is None:
            raise JobNotFound(f"no job with id {job_id}")
        state, moved = found
        if not moved or entry is None:
            raise InvalidStateError(
                f"cannot move job {job_id} to the dead-letter queue: it is {state}; "
                "only failed jobs can be moved",
                state=state,
            )
        return entry

    async def bulk_move_to_dlq(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        all: bool = False,
        reason: str = "manual",
        batch_size: int = 1000,
        on_progress: Progress | None = None,
    ) -> int:
        """Move every ``failed`` job matching the filters to the dead-letter queue."""
        flt = DlqFilter(queue=queue, kind=kind, tag=tag)
        flt.require("bulk_move_to_dlq", all=all)
        reason = check_reason(reason)
        _check_limit("batch_size", batch_size, 10_000)
        done = 0
        while True:
            async with translated(self._core) as conn:
                moved = await dlq_db.dlq_move_failed(
                    conn, self._core.schema, flt, reason=reason, limit=batch_size
                )
            done += moved
            if on_progress is not None and moved:
                on_progress(done)
            if not moved:
                return done

    async def purge_dlq_entry(self, job_id: int) -> None:
        """Delete one dead-letter entry for good; raises :class:`wai.JobNotFound`."""
        job_id = check_job_id(job_id)
        async with translated(self._core) as conn:
            purged = await dlq_db.dlq_purge(conn, self._core.schema, ids=[job_id], limit=1)
        if not purged:
            raise JobNotFound(f"job {job_id} is not in the dead-letter queue")

    async def purge_dlq(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        reason: str | None = None,
        all: bool = False,
        batch_size: int = 1000,
        on_progress: Progress | None = None,
    ) -> int:
        """Delete every dead-letter entry matching the filters; returns how many."""
        flt = DlqFilter(queue=queue, kind=kind, tag=tag, reason=reason)
        flt.require("purge_dlq", all=all)
        _check_limit("batch_size", batch_size, 10_000)
        done = 0
        while True:
            async with translated(self._core) as conn:
                purged = await dlq_db.dlq_purge(conn, self._core.schema, flt=flt, limit=batch_size)
            done += purged
            if on_progress is not None and purged:
                on_progress(done)
            if not purged:
                return done

    async def count_dlq(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        reason: str | None = None,
    ) -> int:
        """How many dead-letter entries match the filters (what a bulk action would cover)."""
        flt = DlqFilter(queue=queue, kind=kind, tag=tag, reason=reason)
        async with translated(self._core) as conn:
            return await dlq_db.dlq_count(conn, self._core.schema, flt)
