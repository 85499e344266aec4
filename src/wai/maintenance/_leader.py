"""Leader election through a lease row: one maintenance leader per database and schema."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai._supervise import repeat
from wai.maintenance import _queries as maintenance_db
from wai.maintenance._service import START_SPREAD, PeriodicService, staggered, stop_tasks

__all__ = ["Elector", "new_instance_id"]

logger = logging.getLogger("wai.maintenance")

LEADER_NAME = "maintenance"


def new_instance_id() -> str:
    """A fresh id for one runtime: ``host:pid:random``."""
    # The random part tells apart two runtimes of one process, and a pid used again later.
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Elector:
    """Holds or seeks the leadership lease; runs the services only while leading.

    The lease lasts ``2 x interval`` and is renewed every ``interval / 2``, so a
    leader that dies is replaced within about two intervals. The lease row works
    through PgBouncer in transaction mode, where session advisory locks do not.
    *leader_id* defaults to a fresh :func:`new_instance_id`; the runtime passes
    its own instance id, so the lease row and the runtime record agree. Once elected,
    the services begin one after another over *spread* seconds, in the order given
    (:func:`wai.maintenance._service.staggered`).
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        interval: float,
        services: Callable[[], Sequence[PeriodicService]],
        leader_id: str | None = None,
        spread: float = START_SPREAD,
    ) -> None:
        self._pool = pool
        self._spread = spread
        self._schema = schema
        self._interval = interval
        self._services = services
        self.leader_id = leader_id or new_instance_id()
        self.is_leader = False
        self._tasks: list[asyncio.Task[None]] = []
        self._election: asyncio.Future[bool] | None = None

    async def attempt(self) -> bool:
        """Try to take or renew the lease once."""
        async with self._pool.connection() as conn:
            elected = await maintenance_db.leader_attempt_elect(
                conn,
                self._schema,
                name=LEADER_NAME,
                leader_id=self.leader_id,
                ttl=self._interval * 2,
            )
        return elected is not None

    async def run_forever(self) -> None:
        """Elect, renew and run services until cancelled; resign on the way out.

        An election that fails, expectedly (database error) or not, counts as lost:
        the services stop until one succeeds. Any other unexpected error in a round is
        logged and the next round runs on time (:func:`wai._supervise.repeat`).
        """
        try:
            interval = self._interval / 2
            await repeat("leader election", self._round, interval=interval, cap=interval)
        finally:
            election = self._election
            if election is not None:
                # let it end first (bounded: a lost server must not hold the shutdown)
                await asyncio.wait({election}, timeout=5)
                election.cancel()  # nothing when it ended
                election.add_done_callback(_retrieve)
            await self._stop_services()
            self.is_leader = False
            # Resign even when not (knowingly) leading: an election may have committed
            # just before the cancellation, and deleting someone else's lease is impossible.
            try:
                # Bounded: a shutdown must not wait on an exhausted pool; the lease expires anyway.
                async with self._pool.connection(timeout=2) as conn:
                    await maintenance_db.leader_resign(
                        conn, self._schema, name=LEADER_NAME, leader_id=self.leader_id
                    )
            except Exception as exc:  # the lease expires on its own
                logger.debug("wai: resign failed: %s", exc)

    async def _round(self) -> None:
        # Shielded: a cancel must not abandon an election whose statement the server
        # may still commit, after the resign in run_forever has found nothing.
        self._election = election = asyncio.ensure_future(self.attempt())
        try:
            leading = await asyncio.shield(election)
        except psycopg.Error as exc:
            logger.warning("wai: leader election failed (%s)", exc)
            leading = False
        except Exception:
            logger.exception("wai: leader election failed")
            leading = False
        if leading and not self.is_leader:
            logger.info("wai: %s is now the maintenance leader", self.leader_id)
            services = self._services()
            starts = staggered([s.interval for s in services], self._spread)
            self._tasks = [
                asyncio.create_task(_run_after(t, s), name=f"wai-{type(s).__name__}")
                for s, t in zip(services, starts, strict=True)
            ]
        elif not leading and self.is_leader:
            logger.warning("wai: %s lost maintenance leadership", self.leader_id)
            await self._stop_services()
        self.is_leader = leading

    async def _stop_services(self) -> None:
        # Not suppress(CancelledError) around ``await t``: that also swallowed the
        # elector's own cancellation when shutdown came while a service was still
        # stopping, and the elector then ran (and led) on, hanging the shutdown.
        await stop_tasks(self._tasks)
        self._tasks = []


async def _run_after(seconds: float, service: PeriodicService) -> None:
    """Run ``service`` from ``seconds`` from now on, until cancelled."""
    await asyncio.sleep(seconds)
    await service.run_forever()


def _retrieve(task: asyncio.Future[bool]) -> None:
    """Mark an abandoned election's outcome as seen: its error was logged or is moot."""
    if not task.cancelled():
        task.exception()
