"""Leader election through a lease row: one maintenance leader per database and schema."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai import _db_async as db
from wai.maintenance._service import PeriodicService

__all__ = ["Elector"]

logger = logging.getLogger("wai.maintenance")

LEADER_NAME = "maintenance"


class Elector:
    """Holds or seeks the leadership lease; runs the services only while leading.

    The lease lasts ``2 x interval`` and is renewed every ``interval / 2``, so a
    leader that dies is replaced within about two intervals. The lease row works
    through PgBouncer in transaction mode, where session advisory locks do not.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        interval: float,
        services: Callable[[], Sequence[PeriodicService]],
    ) -> None:
        self._pool = pool
        self._schema = schema
        self._interval = interval
        self._services = services
        self.leader_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.is_leader = False
        self._tasks: list[asyncio.Task[None]] = []

    async def attempt(self) -> bool:
        """Try to take or renew the lease once."""
        async with self._pool.connection() as conn:
            elected = await db.leader_attempt_elect(
                conn,
                self._schema,
                name=LEADER_NAME,
                leader_id=self.leader_id,
                ttl=self._interval * 2,
            )
        return elected is not None

    async def run_forever(self) -> None:
        """Elect, renew and run services until cancelled; resign on the way out."""
        try:
            while True:
                try:
                    leading = await self.attempt()
                except psycopg.Error as exc:
                    logger.warning("wai: leader election failed (%s)", exc)
                    leading = False
                if leading and not self.is_leader:
                    logger.info("wai: %s is now the maintenance leader", self.leader_id)
                    self._tasks = [
                        asyncio.create_task(s.run_forever(), name=f"wai-{type(s).__name__}")
                        for s in self._services()
                    ]
                elif not leading and self.is_leader:
                    logger.warning("wai: %s lost maintenance leadership", self.leader_id)
                    await self._stop_services()
                self.is_leader = leading
                await asyncio.sleep(self._interval / 2)
        finally:
            await self._stop_services()
            if self.is_leader:
                self.is_leader = False
                try:
                    async with self._pool.connection(timeout=2) as conn:
                        await db.leader_resign(
                            conn, self._schema, name=LEADER_NAME, leader_id=self.leader_id
                        )
                except Exception as exc:  # the lease expires on its own
                    logger.debug("wai: resign failed: %s", exc)

    async def _stop_services(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks = []
