"""Writes attempt outcomes in batches: many outcomes and their follow-ups, one transaction."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai._transitions_async import apply_outcomes
from wai.context import AttemptState
from wai.errors import WaiError
from wai.job import JobRow
from wai.outcomes import Outcome, decide
from wai.registry import Registry

__all__ = ["Finalizer"]

logger = logging.getLogger("wai.worker")

Committed = Callable[[Sequence[tuple[Outcome, AttemptState]], Sequence[JobRow]], None]


class Finalizer:
    """Collects outcomes and applies them with one guarded statement per batch.

    A batch is written once ``flush_interval`` passed since the first outcome
    arrived, at once when it is full, or at once when ``busy()`` says no handler
    is still running (no outcome is coming that waiting could add). Up to
    ``writers`` batches are written at once, each on its own connection: while one
    waits on the server (its statements, its commit), the next is built and sent.
    Batches hold disjoint attempts, and every outcome is guarded by its own
    attempt, so their order does not matter.

    An outcome whose lease is stale matches nothing and is dropped. When a batch
    cannot be written because the database is unreachable it is retried with
    backoff; the attempts keep heartbeating meanwhile. If the process dies first,
    the jobs are still ``running`` and rescue recovers them.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        *,
        batch_size: int,
        flush_interval: float,
        on_committed: Committed,
        registry: Registry,
        busy: Callable[[], int] = lambda: 1,
        writers: int = 1,
    ) -> None:
        self._pool = pool
        self._schema = schema
        self._batch_size = batch_size
        self._flush_interval = flush_interval
        self._on_committed = on_committed
        self._registry = registry
        self._busy = busy
        self._slots = asyncio.Semaphore(writers)
        self._writing: set[asyncio.Task[None]] = set()
        self._pending: list[tuple[Outcome, AttemptState]] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.transactions = 0

    def submit(self, outcome: Outcome, state: AttemptState) -> None:
        """Queue an outcome for the next batch."""
        self._pending.append((outcome, state))
        self._idle.clear()
        self._wake.set()

    @property
    def pending(self) -> int:
        """Outcomes not yet written."""
        return len(self._pending)

    async def wait_idle(self) -> None:
        """Return once every submitted outcome has been written (or dropped)."""
        await self._idle.wait()

    async def run_forever(self) -> None:
        """Write batches until cancelled; a cancel also cancels the writes under way.

        (A cancelled write commits nothing, or commits its whole batch: its jobs are
        then either finished or still ``running``, for rescue.)
        """
        try:
            while True:
                await self._wake.wait()
                # Wait a little for more outcomes, unless no handler is running that could
                # add one: then nothing is gained by waiting, and every slot waits on it.
                if (
                    self._flush_interval
                    and len(self._pending) < self._batch_size
                    and self._busy() > 0
                ):
                    await asyncio.sleep(self._flush_interval)
                await self._slots.acquire()
                batch = self._pending[: self._batch_size]
                del self._pending[: self._batch_size]
                if not self._pending:
                    self._wake.clear()
                if not batch:
                    self._slots.release()
                    self._settle()
                    continue
                task = asyncio.create_task(self._write_batch(batch))
                self._writing.add(task)
                task.add_done_callback(self._written)
        finally:
            writing = list(self._writing)
            for task in writing:
                task.cancel()
            await asyncio.gather(*writing, return_exceptions=True)

    def _written(self, task: asyncio.Task[None]) -> None:
        self._writing.discard(task)
        self._slots.release()
        self._settle()

    def _settle(self) -> None:
        if not self._pending and not self._writing:
            self._idle.set()

    async def _write_batch(self, batch: list[tuple[Outcome, AttemptState]]) -> None:
        try:
            await self._write(batch)
        except Exception:  # a bug, not the database: keep writing the next batches
            logger.exception(
                "wai: writing %d outcomes failed; those jobs stay running until rescued",
                len(batch),
            )
            self._on_committed(batch, [])

    async def _write(self, batch: list[tuple[Outcome, AttemptState]]) -> None:
        states = {outcome.job_id: state for outcome, state in batch}
        reads_row = self._registry.reads_row
        with_rows = any(reads_row(state.kind, outcome.event) for outcome, state in batch)
        delay = 0.05
        while True:
            try:
                async with self._pool.connection() as conn:
                    applied = await apply_outcomes(
                        conn,
                        self._schema,
                        self._registry,
                        [outcome for outcome, _ in batch],
                        with_rows=with_rows,
                    )
                self.transactions += 1
            except psycopg.OperationalError as exc:
                logger.warning("wai: could not write %d outcomes (%s); retrying", len(batch), exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            except (psycopg.Error, WaiError):
                if len(batch) == 1:
                    logger.exception(
                        "wai: outcome of job %s was rejected; it stays running until rescued",
                        batch[0][0].job_id,
                    )
                    self._on_committed(batch, [])
                    return
                # Isolate the bad outcome: write the others one by one.
                for item in batch:
                    await self._write([item])
                return
            break
        rejected = {outcome.job_id for outcome, _ in applied.rejected}
        self._on_committed([item for item in batch if item[0].job_id not in rejected], applied.rows)
        for outcome, error in applied.rejected:
            state = states[outcome.job_id]
            if outcome.followup_failure:
                logger.error(
                    "wai: job %s: recording the follow-up failure failed too (%s); "
                    "it stays running until rescued",
                    outcome.job_id,
                    error,
                )
                self._on_committed([(outcome, state)], [])
                continue
            logger.warning(
                "wai: job %s: %s; recording the attempt as failed", outcome.job_id, error
            )
            failure = decide(
                job_id=outcome.job_id,
                run_lease=outcome.run_lease,
                attempt=state.attempt,
                max_attempts=state.max_attempts,
                exc=error,
            )
            self.submit(
                dataclasses.replace(failure, progress=outcome.progress, followup_failure=True),
                state,
            )
