"""Rescue: attempts whose worker died, that outlived their deadline, or whose callback expired."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai._job import JobRow, JobState
from wai._logging import emit, jobs_extra
from wai.maintenance._service import SCAN_SHARE, PeriodicService
from wai.transitions._rescue import rescue

__all__ = ["Rescuer", "RescuerResult"]

logger = logging.getLogger("wai.maintenance")

#: At most this many job ids are named in one log line (all of them are in ``extra``).
_NAMED = 20


@dataclass(frozen=True, slots=True)
class RescuerResult:
    """Jobs rescued in one pass by reason: stale_heartbeat, deadline_exceeded, callback_timeout."""

    rescued: dict[str, int] = field(default_factory=dict[str, int])


class Rescuer(PeriodicService):
    """Moves abandoned attempts to ``retryable`` (or ``failed`` on their last attempt).

    The rescue closes the old attempt (the row leaves ``running``), so the late
    result of a zombie worker is fenced. A deadline is rescued ``deadline_grace``
    seconds after it passed, so a live worker records its own deadline error first.
    ``on_rescued`` lets the rescuing process flip ``is_cancelled()`` for attempts
    that live in it. A job failed by rescue in a queue with the dead-letter queue
    on moves there in the rescue's transaction (reason ``callback_timeout`` or
    ``max_attempts_exhausted``).
    """

    #: Rescue reads every running row's index entry: spaced out while that is slow.
    share = SCAN_SHARE

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        interval: float,
        staleness: float,
        deadline_grace: float = 1.0,
        batch_size: int = 1000,
        on_rescued: Callable[[Sequence[tuple[JobRow, str]]], None] | None = None,
    ) -> None:
        super().__init__(pool, schema, interval=interval)
        self._staleness = staleness
        self._deadline_grace = deadline_grace
        self._batch_size = batch_size
        self._on_rescued = on_rescued

    async def run_once(self) -> RescuerResult:
        """Rescue in batches until none is left or 32 batches ran."""
        counts: dict[str, int] = {}
        # Short transactions (locks held briefly), and a bounded pass: the rest waits for the next.
        for _ in range(32):
            async with self._pool.connection() as conn:
                rows = await rescue(
                    conn,
                    self._schema,
                    staleness=self._staleness,
                    deadline_grace=self._deadline_grace,
                    limit=self._batch_size,
                )
            for _row, reason in rows:
                counts[reason] = counts.get(reason, 0) + 1
            if rows and logger.isEnabledFor(logging.WARNING):
                _log_rescued(rows)
            if rows and self._on_rescued is not None:
                self._on_rescued(rows)
            if len(rows) < self._batch_size:
                break
        return RescuerResult(counts)


def _log_rescued(rows: Sequence[tuple[JobRow, str]]) -> None:
    """One WARNING per reason: how many jobs, which, and where they went.

    Its ``extra``: ``reason``, ``count``, ``job_ids``; for a single job its fields too
    (``job_id``, ``kind``, ``queue``, ``attempt``: the attempt that was rescued).
    """
    by_reason: dict[str, list[JobRow]] = {}
    for row, reason in rows:
        by_reason.setdefault(reason, []).append(row)
    for reason, rescued in by_reason.items():
        ids = [row.id for row in rescued]
        named = ", ".join(map(str, ids[:_NAMED])) + (", ..." if len(ids) > _NAMED else "")
        failed = sum(row.state is JobState.FAILED for row in rescued)
        fate = f"{len(ids) - failed} to retry, {failed} failed (no attempt left)"
        emit(
            logger,
            logging.WARNING,
            "rescued %d job%s (%s): %s; jobs %s",
            len(ids),
            "" if len(ids) == 1 else "s",
            reason,
            fate,
            named,
            extra=jobs_extra(rescued, reason=reason),
        )
