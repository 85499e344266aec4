"""Periodic schedules' operations behind the async client (source of the sync client)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from wai._core_async import AsyncClientCore, translated
from wai._job import JobRow
from wai.cron import _queries_async as cron_db
from wai.cron._models import Periodic, Schedule, check_name
from wai.errors import ScheduleNotFound

__all__ = ["AsyncCronOps"]


def _missing(name: str) -> ScheduleNotFound:
    return ScheduleNotFound(
        f"no periodic schedule named {name!r}: `wai cron list` shows the stored ones"
    )


class AsyncCronOps:
    """Store, list, pause, resume, trigger and delete periodic schedules.

    Schedules live in the ``cron_schedules`` table, by name. A process stores
    the ones it registers with :meth:`periodic` when it starts; no process
    deletes a schedule it does not know, and a pause survives every redeploy.
    """

    def __init__(self, core: AsyncClientCore) -> None:
        self._core = core

    def periodic(
        self,
        name: str,
        expr: str,
        args: Any,
        *,
        timezone: str = "UTC",
        kind: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        missed_fire_policy: str = "coalesce",
    ) -> None:
        """Validate a schedule and register it; :meth:`upsert_cron` stores it."""
        self._core.registry.add_periodic(
            Periodic.build(
                name,
                expr,
                args,
                timezone=timezone,
                kind=kind,
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                tags=tags,
                metadata=metadata,
                missed_fire_policy=missed_fire_policy,
            )
        )

    async def upsert_cron(self) -> list[str]:
        """Store the schedules registered with :meth:`periodic`; returns their names."""
        registry = self._core.registry
        items = [
            (p, p.job(registry.queue_of, registry.max_attempts_of))
            for p in registry.periodics.values()
        ]
        async with translated(self._core) as conn:
            await cron_db.cron_upsert(conn, self._core.schema, items)
        return [p.name for p, _ in items]

    async def list_cron(self) -> list[Schedule]:
        """Every stored schedule, by name, with its next fire time."""
        async with translated(self._core) as conn:
            return await cron_db.cron_list(conn, self._core.schema)

    async def get_cron(self, name: str) -> Schedule:
        """One stored schedule; raises :class:`wai.ScheduleNotFound`."""
        name = check_name(name)
        async with translated(self._core) as conn:
            found = await cron_db.cron_get(conn, self._core.schema, name)
        if found is None:
            raise _missing(name)
        return found

    async def pause_cron(self, name: str) -> Schedule:
        """Stop a schedule from firing until :meth:`resume_cron`; redeploys keep it paused."""
        name = check_name(name)
        async with translated(self._core) as conn:
            found = await cron_db.cron_pause(conn, self._core.schema, name)
        if found is None:
            raise _missing(name)
        return found

    async def resume_cron(self, name: str) -> Schedule:
        """Let a paused schedule fire again."""
        name = check_name(name)
        async with translated(self._core) as conn:
            found = await cron_db.cron_resume(conn, self._core.schema, name)
        if found is None:
            raise _missing(name)
        return found

    async def trigger_cron(self, name: str) -> JobRow:
        """Enqueue one job of the schedule now, even while paused; its cursor stays."""
        name = check_name(name)
        async with translated(self._core) as conn:
            row = await cron_db.cron_trigger(conn, self._core.schema, name)
        if row is None:
            raise _missing(name)
        return row

    async def delete_cron(self, name: str) -> None:
        """Delete a stored schedule. A process that registers it stores it again on start."""
        name = check_name(name)
        async with translated(self._core) as conn:
            deleted = await cron_db.cron_delete(conn, self._core.schema, name)
        if not deleted:
            raise _missing(name)
