"""The runtime record: this process's row in ``runtime_instances``, refreshed periodically."""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any

import psycopg

from wai._supervise import repeat
from wai._version import __version__
from wai.worker import _queries as worker_db

if TYPE_CHECKING:
    from wai.worker._runtime import Runtime

__all__ = ["Recorder", "role_of"]

logger = logging.getLogger("wai.worker")


def role_of(*, serves_queues: bool, maintenance: bool) -> str:
    """``"worker"``, ``"maintenance"`` or ``"worker+maintenance"``."""
    parts = [name for name, on in (("worker", serves_queues), ("maintenance", maintenance)) if on]
    return "+".join(parts)


class Recorder:
    """Upserts the runtime's record every ``record_interval`` and deletes it at shutdown.

    The record says who the process is (host, pid, version, role, queues and
    concurrency), what it is doing (attempts in flight, leadership) and whether
    it looks healthy: not stopping, LISTEN connected (when it serves queues),
    its latest claim succeeded, and its heartbeat loop ran within
    ``heartbeat_staleness`` (so its running jobs are not about to be rescued).
    """

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._started = time.monotonic()
        self._hostname = socket.gethostname()
        self._pid = os.getpid()

    def snapshot(self) -> dict[str, Any]:
        """The record's values as keyword arguments of ``runtime_instance_upsert``."""
        rt = self._runtime
        settings = rt.settings
        now = time.monotonic()
        queues = {name: config.concurrency for name, config in rt.queues.items()}
        producers = list(rt.producers.values())
        claims = [p.last_claim_at for p in producers if p.last_claim_at is not None]
        beat = rt.heartbeater.last_beat_at if rt.heartbeater is not None else None
        listen = rt.listening
        claim_failing = any(p.claim_failing for p in producers)
        # Until the first heartbeat pass, the loop counts as alive since start.
        beat_age = now - (beat if beat is not None else self._started)
        health: dict[str, Any] = {
            "listen": listen,
            "last_claim_age": round(now - max(claims), 3) if claims else None,
            "last_heartbeat_age": round(now - beat, 3) if beat is not None else None,
            "claim_failing": claim_failing,
            "stopping": rt.stopping,
            "record_interval": settings.record_interval,
        }
        healthy = (
            not rt.stopping
            and listen is not False
            and not claim_failing
            and beat_age < settings.heartbeat_staleness
        )
        return {
            "instance_id": rt.instance_id,
            "hostname": self._hostname,
            "pid": self._pid,
            "version": __version__,
            "role": role_of(serves_queues=bool(queues), maintenance=settings.maintenance),
            "queues": queues,
            "concurrency": sum(queues.values()),
            "in_flight": len(rt.attempts),
            "leader": rt.elector is not None and rt.elector.is_leader,
            "healthy": healthy,
            "health": health,
            "specs": rt.client.registry.published_specs(),
        }

    async def run_once(self) -> None:
        """Write the record once."""
        rt = self._runtime
        async with rt.client.pool.connection() as conn:
            await worker_db.runtime_instance_upsert(conn, rt.client.schema, **self.snapshot())

    async def refresh(self) -> bool:
        """Write the record once; a database error is logged, not raised."""
        try:
            await self.run_once()
        except psycopg.Error as exc:
            logger.warning("wai: writing the runtime record failed (%s)", exc)
            return False
        return True

    async def run_forever(self) -> None:
        """Refresh the record every ``record_interval`` until cancelled (a pass that
        raises unexpectedly is logged and retried, see :func:`wai._supervise.repeat`)."""
        interval = self._runtime.settings.record_interval
        await repeat("runtime record", self.refresh, interval=interval, sleep_first=True)

    async def delete(self) -> None:
        """Remove the record (graceful shutdown); a failure leaves it to the leader."""
        rt = self._runtime
        try:
            # Shutdown waits little on an exhausted pool: the leader collects a leftover record.
            async with rt.client.pool.connection(timeout=2) as conn:
                await worker_db.runtime_instance_delete(conn, rt.client.schema, rt.instance_id)
        except Exception as exc:  # the leader collects stale records
            logger.debug("wai: deleting the runtime record failed: %s", exc)
