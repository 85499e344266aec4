"""The claim loop of one queue: wake on NOTIFY or poll, claim a batch, start each attempt."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai._flow import FlowState, claim_wait
from wai._job import JobRow
from wai._logging import emit
from wai._pace import next_wait
from wai._queues import QueueConfig
from wai._supervise import supervise
from wai.worker import _queries as worker_db
from wai.worker._floors import Floors

__all__ = ["FLOW_REREAD", "QueueProducer"]

# How often a claim loop reads its queue's limits when no notification says they changed
# (seconds): the bound on how long a limit set while LISTEN was down goes unnoticed. A
# claim never breaks a limit meanwhile: the plain claim takes nothing from a limited queue.
FLOW_REREAD = 30.0

logger = logging.getLogger("wai.worker")


class QueueProducer:
    """Keeps up to ``concurrency`` attempts of one queue running in this process."""

    def __init__(
        self,
        name: str,
        config: QueueConfig,
        *,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        poll_interval: float,
        burst: bool,
        deadlines: dict[str, float],
        launch: Callable[[Sequence[JobRow], QueueProducer], None],
        writers: int = 1,
        idle_cap: float | None = None,
        listening: Callable[[], bool] = lambda: False,
    ) -> None:
        self.name = name
        self.config = config
        self.running = 0
        self.finishing = 0
        self.overrunning = 0
        self.claims = 0
        # for the runtime record: when the last claim statement succeeded, and whether
        # the latest one failed (time.monotonic() seconds)
        self.last_claim_at: float | None = None
        self.claim_failing = False
        # Flow control: whether the queue has limits (claims then take its lock), when
        # that was last read, and what the latest limited claim left.
        self.limited = False
        self.flow: FlowState | None = None
        self._flow_read_at: float | None = None
        # Where each priority's available jobs begin (wai.worker._floors).
        self.floors = Floors()
        self._pool = pool
        self._schema = schema
        self._poll_interval = poll_interval
        # While LISTEN delivers, an idle queue's poll backs off up to this (wai._pace).
        self._idle_cap = poll_interval if idle_cap is None else idle_cap
        self._listening = listening
        self._idle = 0  # empty claims in a row
        self._burst = burst
        self._deadlines = deadlines
        self._launch = launch
        self._writers = writers
        self._wake = asyncio.Event()
        self._freed = asyncio.Event()
        self._stopping = False
        self._stopped = asyncio.Event()
        self.drained = asyncio.Event()

    def wake(self) -> None:
        """A job may be available: claim soon."""
        self._wake.set()

    @property
    def capped_globally(self) -> bool:
        """Whether the queue's latest claim ran under a global concurrency."""
        return self.flow is not None and self.flow.global_concurrency is not None

    def flow_changed(self) -> None:
        """The queue's limits may have changed: read them before the next claim."""
        self._flow_read_at = None
        self._wake.set()

    def release(self) -> None:
        """An attempt's handler returned: its slot is free, its outcome is being written."""
        self.running -= 1
        self.finishing += 1
        self._freed.set()

    def finalized(self) -> None:
        """An attempt's outcome was written (or given up on)."""
        self.finishing -= 1
        self._freed.set()

    def hold(self, call: concurrent.futures.Future[Any]) -> None:
        """A ``def`` handler outlived its deadline: its attempt is over, but its thread
        runs on, so its slot stays taken until ``call`` ends. The process then claims no
        job it has no thread for (one that would time out while waiting for a thread)."""
        self.overrunning += 1
        loop = asyncio.get_running_loop()

        def ended(_: concurrent.futures.Future[Any]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: nothing to free
                loop.call_soon_threadsafe(self._unhold)

        call.add_done_callback(ended)

    def _unhold(self) -> None:
        self.overrunning -= 1
        self._freed.set()

    def free_slots(self) -> int:
        """Slots to claim into: running handlers count, threads of handlers that
        outlived their deadline too, and so do outcomes beyond one concurrency's worth
        per completion writer still waiting to be written, so claims never outrun the
        finalizer by more than its writers can hold."""
        concurrency = self.config.concurrency
        backlog = self.finishing - self._writers * concurrency
        return concurrency - self.running - self.overrunning - max(0, backlog)

    def stop(self) -> None:
        """Stop claiming; running attempts are not touched."""
        self._stopping = True
        self._stopped.set()
        self._wake.set()
        self._freed.set()

    async def _claim(self, limit: int) -> list[JobRow]:
        async with self._pool.connection() as conn:
            now = time.monotonic()
            if self._flow_read_at is None or now - self._flow_read_at > FLOW_REREAD:
                self.limited = await worker_db.queue_flow_settings(conn, self._schema, self.name)
                self._flow_read_at = now
            if self.floors.due(now):
                self.floors.probing(now)
                await worker_db.job_ready_probe(
                    conn, self._schema, queue=self.name, floors=self.floors
                )
            if not self.limited:
                self.flow = None
                rows = await worker_db.job_claim(
                    conn,
                    self._schema,
                    queue=self.name,
                    limit=limit,
                    floors=self.floors.values,
                    deadlines=self._deadlines,
                    default_deadline=self.config.deadline,
                )
                self.floors.claimed += len(rows)
                return rows
            rows, self.flow = await worker_db.job_claim_limited(
                conn,
                self._schema,
                queue=self.name,
                limit=limit,
                floors=self.floors.values,
                deadlines=self._deadlines,
                default_deadline=self.config.deadline,
            )
            self.floors.claimed += len(rows)
            if self.flow is None:  # its limits were lifted
                self.limited = False
            return rows

    async def _hold(self, seconds: float) -> None:
        """Wait ``seconds`` for flow control (a token, a free global slot); a wakeup or a
        freed local slot ends a global-concurrency wait early, a stop any wait."""
        self._freed.clear()
        waits = [
            asyncio.ensure_future(asyncio.sleep(seconds)),
            asyncio.ensure_future(self._stopped.wait()),
        ]
        if self.flow is None or self.flow.tokens is None or self.flow.tokens >= 1:
            waits.append(asyncio.ensure_future(self._wake.wait()))
            waits.append(asyncio.ensure_future(self._freed.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def run_forever(self) -> None:
        """Claim until stopped (or, in burst mode, until the queue is empty).

        A database error on a claim is retried with backoff; an unexpected error
        restarts the loop with backoff (:func:`wai._supervise.supervise`).
        """
        await supervise(f"claim loop of queue {self.name!r}", self._claim_loop)
        self.drained.set()

    async def _claim_loop(self) -> None:
        cap = self.config.claim_batch_size or self.config.concurrency
        more = True
        delay = 0.05
        while not self._stopping:
            free = self.free_slots()
            if free <= 0:
                self._freed.clear()
                await self._freed.wait()
                continue
            if not more:
                # NOTIFY is only a wakeup: poll anyway, for one sent while LISTEN was down;
                # while it delivers, each empty claim lets the next poll wait longer.
                wait = next_wait(
                    self._poll_interval,
                    cap=self._idle_cap,
                    idle=self._idle,
                    listening=self._listening(),
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
                if self._stopping:
                    break
                free = self.free_slots()
                if free <= 0:
                    continue
            # Cleared before the claim, so a NOTIFY that arrives during it triggers the next one.
            self._wake.clear()
            limit = min(free, cap)
            try:
                rows = await self._claim(limit)
            # Retrying is safe: a claim committed but unacknowledged leaves its jobs for rescue.
            except psycopg.Error as exc:
                self.claim_failing = True
                emit(
                    logger,
                    logging.WARNING,
                    "wai: claim on queue %r failed (%s); retrying",
                    self.name,
                    exc,
                    extra={"queue": self.name},
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._poll_interval * 5)
                more = True
                continue
            delay = 0.05
            self.claims += 1
            self.last_claim_at = time.monotonic()
            self.claim_failing = False
            self._idle = 0 if rows else self._idle + 1
            self.running += len(rows)
            self._launch(rows, self)
            # A full batch may have left more behind: claim again without waiting.
            more = len(rows) == limit
            wait = claim_wait(self.flow, wanted=limit, claimed=len(rows))
            if wait is not None:
                # Flow control capped the claim, not the queue's jobs: look again when it
                # may let more through.
                await self._hold(min(wait, self._poll_interval))
                more = True
                continue
            if self._burst and not rows:
                # Running attempts may still make work available here (a follow-up, say):
                # look once more after their outcomes are written.
                while self.running or self.finishing:
                    self._freed.clear()
                    await self._freed.wait()
                rows = await self._claim(1) if not self._stopping else []
                if not rows:
                    break
                self.running += 1
                self._launch(rows, self)
                more = True
