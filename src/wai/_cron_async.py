"""Periodic-schedule methods shared by the async client (source of the sync client)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from psycopg import AsyncConnection

from wai import _cron_db_async as cron_db
from wai._translate import translate_errors
from wai.errors import ScheduleNotFound
from wai.job import JobRow
from wai.periodic import Schedule, check_name
from wai.registry import Registry

__all__ = ["AsyncCronMixin"]


def _missing(name: str) -> ScheduleNotFound:
    return ScheduleNotFound(
        f"no periodic schedule named {name!r}: `wai cron list` shows the stored ones"
    )


class AsyncCronMixin:
    """Store, list, pause, resume, trigger and delete periodic schedules.

    Schedules live in the ``cron_schedules`` table, by name. A process stores
    the ones it registers with :meth:`periodic` when it starts; no process
    deletes a schedule it does not know, and a pause survives every redeploy.
    """

    schema: str
    registry: Registry

    def connection(self) -> AbstractAsyncContextManager[AsyncConnection[Any]]:
        """Borrow a connection (provided by the client)."""
        raise NotImplementedError

    async def upsert_cron(self) -> list[str]:
        """Store the schedules registered with :meth:`periodic`; returns their names.

        New schedules start counting from now; existing ones get the registered
        expression, zone, args and options while their cursor and pause stay.
        ``start()`` calls this for you.
        """
        items = [
            (p, p.job(self.registry.queue_of, self.registry.max_attempts_of))
            for p in self.registry.periodics.values()
        ]
        async with self.connection() as conn:
            with translate_errors(self.schema):
                await cron_db.cron_upsert(conn, self.schema, items)
        return [p.name for p, _ in items]

    async def list_cron(self) -> list[Schedule]:
        """Every stored schedule, by name, with its next fire time."""
        async with self.connection() as conn:
            with translate_errors(self.schema):
                return await cron_db.cron_list(conn, self.schema)

    async def get_cron(self, name: str) -> Schedule:
        """One stored schedule; raises :class:`wai.ScheduleNotFound`."""
        name = check_name(name)
        async with self.connection() as conn:
            with translate_errors(self.schema):
                found = await cron_db.cron_get(conn, self.schema, name)
        if found is None:
            raise _missing(name)
        return found

    async def pause_cron(self, name: str) -> Schedule:
        """Stop a schedule from firing until :meth:`resume_cron`; redeploys keep it paused."""
        name = check_name(name)
        async with self.connection() as conn:
            with translate_errors(self.schema):
                found = await cron_db.cron_pause(conn, self.schema, name)
        if found is None:
            raise _missing(name)
        return found

    async def resume_cron(self, name: str) -> Schedule:
        """Let a paused schedule fire again.

        The fire times it missed while paused are owed by its missed-fire
        policy: one job for ``coalesce``, one per fire time for ``catch_up``.
        """
        name = check_name(name)
        async with self.connection() as conn:
            with translate_errors(self.schema):
                found = await cron_db.cron_resume(conn, self.schema, name)
        if found is None:
            raise _missing(name)
        return found

    async def trigger_cron(self, name: str) -> JobRow:
        """Enqueue one job of the schedule now, even while paused; its cursor stays.

        The job's ``metadata["wai.cron"]`` has ``"manual": true``.
        """
        name = check_name(name)
        async with self.connection() as conn:
            with translate_errors(self.schema):
                row = await cron_db.cron_trigger(conn, self.schema, name)
        if row is None:
            raise _missing(name)
        return row

    async def delete_cron(self, name: str) -> None:
        """Delete a stored schedule. A process that registers it stores it again on start."""
        name = check_name(name)
        async with self.connection() as conn:
            with translate_errors(self.schema):
                deleted = await cron_db.cron_delete(conn, self.schema, name)
        if not deleted:
            raise _missing(name)
