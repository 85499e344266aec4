"""Firing periodic schedules: the maintenance leader's cron pass."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai._logging import emit
from wai._pace import IdlePace
from wai.cron import _queries_async as cron_db
from wai.cron._models import MAX_FIRES_PER_PASS, fire_plan, next_fire
from wai.errors import ValidationError
from wai.maintenance._service import PeriodicService

__all__ = ["CronFirer", "CronResult"]

logger = logging.getLogger("wai.maintenance")


@dataclass(frozen=True, slots=True)
class CronResult:
    """Jobs enqueued in one pass, per schedule name, and the schedules skipped.

    ``lost`` names the schedules another process fired (or paused) between this
    pass's read and its write; ``unreadable`` those whose stored expression or
    zone this version cannot read.
    """

    fired: dict[str, int] = field(default_factory=dict[str, int])
    lost: list[str] = field(default_factory=list[str])
    unreadable: list[str] = field(default_factory=list[str])
    #: Seconds from this pass's clock to the next fire of any schedule it read (None:
    #: none will fire); what a paced firer sleeps at most.
    due_in: float | None = None


class CronFirer(PeriodicService):
    """Enqueues the jobs that periodic schedules owe, every ``interval`` seconds.

    Times come from the database clock. For each schedule that is not paused,
    the fire times in ``(cursor, now]`` are computed in its time zone
    (:func:`wai.cron.fire_plan`); one statement then moves the cursor with a
    compare-and-set and inserts the jobs, so a fire is enqueued once even when
    two processes run this pass at the same time (a failover, a stalled leader).
    With a ``pace`` it sleeps, while idle, until the next fire of any schedule (or
    the idle cap); a schedule added, changed or resumed wakes it (``<schema>.due``).
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        interval: float,
        pace: IdlePace | None = None,
    ) -> None:
        super().__init__(pool, schema, interval=interval, pace=pace)
        self._warned: set[tuple[str, str, str]] = set()

    async def run_once(self, now: datetime | None = None) -> CronResult:
        """Fire what is due; ``now`` overrides the database clock (for tests)."""
        result = CronResult()
        due_in: float | None = None
        async with self._pool.connection() as conn:
            clock, schedules = await cron_db.cron_active(conn, self._schema)
            now = now or clock
            for s in schedules:
                assert now is not None
                try:
                    fires = fire_plan(s.expr, s.timezone, s.missed_fire_policy, s.cursor_at, now)
                except ValidationError as exc:
                    result.unreadable.append(s.name)
                    # Once per bad definition, not at every pass (each second, by default).
                    if (s.name, s.expr, s.timezone) not in self._warned:
                        self._warned.add((s.name, s.expr, s.timezone))
                        emit(
                            logger,
                            logging.ERROR,
                            "wai: periodic schedule %r not fired: %s",
                            s.name,
                            exc,
                            extra={"schedule": s.name},
                        )
                    continue
                cursor = s.cursor_at
                while fires:
                    jobs = await cron_db.cron_fire(
                        conn, self._schema, name=s.name, expected=cursor, fires=fires
                    )
                    if not jobs:
                        result.lost.append(s.name)
                        break
                    result.fired[s.name] = result.fired.get(s.name, 0) + len(jobs)
                    _log_fired(s.name, jobs)
                    if len(fires) < MAX_FIRES_PER_PASS:
                        break
                    cursor = fires[-1]  # a long catch-up: continue after this batch
                    fires = fire_plan(s.expr, s.timezone, s.missed_fire_policy, cursor, now)
                coming = next_fire(s.expr, s.timezone, now)
                if coming is not None:
                    wait = (coming - now).total_seconds()
                    due_in = wait if due_in is None else min(due_in, wait)
        return replace(result, due_in=due_in)

    def idle_state(self, result: object) -> tuple[bool, float | None]:
        """Busy when it fired; next due at the next fire of any schedule."""
        assert isinstance(result, CronResult)
        return bool(result.fired), result.due_in


def _log_fired(schedule: str, jobs: list[cron_db.FiredJob]) -> None:
    """DEBUG: the jobs one schedule enqueued, with ``job_ids``, ``count`` and ``kind``,
    ``queue``; and ``job_id``, ``attempt``, ``max_attempts`` when it is one job."""
    if not logger.isEnabledFor(logging.DEBUG):
        return
    first = jobs[0]
    extra: dict[str, object] = {
        "job_ids": [job.id for job in jobs],
        "count": len(jobs),
        "kind": first.kind,
        "queue": first.queue,
        "schedule": schedule,
    }
    if len(jobs) == 1:
        extra.update(job_id=first.id, attempt=first.attempt, max_attempts=first.max_attempts)
    emit(
        logger,
        logging.DEBUG,
        "periodic schedule %r enqueued %s (%s, queue %s)",
        schedule,
        f"job {first.id}" if len(jobs) == 1 else f"{len(jobs)} jobs, {first.id} to {jobs[-1].id}",
        first.kind,
        first.queue,
        extra=extra,
    )
