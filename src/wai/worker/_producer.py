"""The claim loop of one queue: wake on NOTIFY or poll, claim batches (a second one while
the first is on the server, when a wakeup comes), start each attempt."""

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

__all__ = ["CLAIMS_IN_FLIGHT", "FLOW_REREAD", "QueueProducer"]

# How often a claim loop reads its queue's limits when no notification says they changed
# (seconds): the bound on how long a limit set while LISTEN was down goes unnoticed. A
# claim never breaks a limit meanwhile: the plain claim takes nothing from a limited queue.
FLOW_REREAD = 30.0

#: Claims of one queue on the server at once in one process (a queue without limits). A
#: job committed while a claim runs is taken by a second one sent at once, not after the
#: first returns; each claim takes only slots free and not reserved by the other.
CLAIMS_IN_FLIGHT = 2

logger = logging.getLogger("wai.worker")


def claim_due(*, in_flight: int, most: int, backlog: bool, woken: bool) -> bool:
    """Whether a claim may be sent as soon as a slot is free, with ``in_flight`` claims on
    the server and at most ``most``.

    With none in flight: behind a full claim (``backlog``: more may be waiting), on a
    wakeup or a poll (``woken``). With one in flight, only on a wakeup (a job committed
    during that claim): a backlog is claimed one full claim after the other, as two claims
    walking the same jobs at once only pass over each other's rows."""
    return in_flight < most and (woken or (backlog and in_flight == 0))


def claim_size(n: int, cap: int) -> int:
    """``n`` rounded down to a claim size: ``cap``, or a power of two or one and a half
    times one (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96 ...) below it.

    A claim's LIMIT is part of its statement's text (``wai.worker._queries``), so each
    size a process uses is a statement of its own, prepared and planned once per
    connection after a few uses. Claims of any size from 1 to ``cap`` are planned afresh
    most of the time; these few sizes are planned once (``bench/claim_cost.py``: the same
    claims as 64 statements or 12, 4.75 against 4.28 ms a claim). Rounding down keeps a
    claim within its slots."""
    if n >= cap:
        return cap
    if n <= 1:
        return max(n, 0)
    power = 1 << (n.bit_length() - 1)  # the largest power of two <= n
    half = power + power // 2
    return half if half <= n else power


def claim_limit(
    room: int, *, cap: int, in_flight: int, most: int, backlog: bool, woken: bool
) -> int:
    """How many jobs a claim sent now asks for, with ``room`` free and unreserved slots
    and ``in_flight`` claims on the server (at most ``most``); 0: send none now.

    A claim for a backlog with none in flight takes all the room, up to ``cap``. One sent on
    a wakeup with none in flight takes an even share of it, so that a job committed during
    this claim still finds a slot for a second one. A second claim takes what is left.
    Every limit is a :func:`claim_size`."""
    if room <= 0 or not claim_due(in_flight=in_flight, most=most, backlog=backlog, woken=woken):
        return 0
    if in_flight == 0 and not backlog:
        return claim_size(max(1, -(-room // most)), cap)
    return claim_size(room, cap)


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
        # The claim loop waits on this one: a wakeup, a claim that returned, a stop, and a
        # freed slot when a claim waits for one (_awaiting_slots).
        self._signal = asyncio.Event()
        self._awaiting_slots = False
        # Slots taken by the claims in flight, until their rows count as running.
        self._reserved = 0
        self._probing = False  # a claim is probing the floors
        # The claim loop's state, shared by its lanes (_claim_loop).
        self._in_flight = 0
        self._halt = False
        self._more = True  # the latest claim was full (or failed): claim again at once
        self._delay = 0.05  # before retrying a failed claim
        self._poll_at: float | None = None  # when an idle queue is polled anyway
        self._stopping = False
        self._stopped = asyncio.Event()
        self.drained = asyncio.Event()

    def wake(self) -> None:
        """A job may be available: claim soon."""
        self._wake.set()
        self._signal.set()

    @property
    def capped_globally(self) -> bool:
        """Whether the queue's latest claim ran under a global concurrency."""
        return self.flow is not None and self.flow.global_concurrency is not None

    def flow_changed(self) -> None:
        """The queue's limits may have changed: read them before the next claim."""
        self._flow_read_at = None
        self.wake()

    def release(self) -> None:
        """An attempt's handler returned: its slot is free, its outcome is being written."""
        self.running -= 1
        self.finishing += 1
        self._slot_freed()

    def finalized(self) -> None:
        """An attempt's outcome was written (or given up on)."""
        self.finishing -= 1
        self._slot_freed()

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
        self._slot_freed()

    def _slot_freed(self) -> None:
        self._freed.set()
        if self._awaiting_slots and self._room() > 0:
            self._signal.set()

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
        self._signal.set()

    async def _claim(self, limit: int) -> list[JobRow]:
        async with self._pool.connection() as conn:
            now = time.monotonic()
            if self._flow_read_at is None or now - self._flow_read_at > FLOW_REREAD:
                self.limited = await worker_db.queue_flow_settings(conn, self._schema, self.name)
                self._flow_read_at = now
            if not self._probing and self.floors.due(now):
                self.floors.probing(now)
                self._probing = True
                try:
                    await worker_db.job_ready_probe(
                        conn, self._schema, queue=self.name, floors=self.floors
                    )
                finally:
                    self._probing = False
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

    def _room(self) -> int:
        """Slots free for a new claim: free slots not reserved by a claim in flight."""
        return self.free_slots() - self._reserved

    def _most_in_flight(self) -> int:
        """How many claims this queue may have on the server at once: one until its
        limits are read and while it has any (a limited claim takes the queue's lock, so a
        second would only wait on the first), and one when a second claim would wait for a
        pooled connection another part of the process holds (the finalizer, heartbeats,
        other queues: a second claim is only ever sent with a connection to spare)."""
        if self._flow_read_at is None or self.limited:
            return 1
        if self._in_flight and not self._spare_connection():
            return 1
        return CLAIMS_IN_FLIGHT

    def _spare_connection(self) -> bool:
        stats = self._pool.get_stats()
        if stats.get("requests_waiting", 0):
            return False
        return stats["pool_available"] > 0 or stats["pool_size"] < stats["pool_max"]

    async def _send(self, limit: int) -> int | None:
        """One claim of up to ``limit`` jobs, whose slots are reserved until its rows are
        counted as running and launched. Returns how many it took; None when it failed
        (logged; the loop retries after a backoff)."""
        try:
            rows = await self._claim(limit)
        except psycopg.Error as exc:
            # Retrying is safe: a claim committed but unacknowledged leaves its jobs for rescue.
            self.claim_failing = True
            emit(
                logger,
                logging.WARNING,
                "wai: claim on queue %r failed (%s); retrying",
                self.name,
                exc,
                extra={"queue": self.name},
            )
            return None
        finally:
            self._reserved -= limit
        self.claims += 1
        self.last_claim_at = time.monotonic()
        self.claim_failing = False
        self._idle = 0 if rows else self._idle + 1
        self.running += len(rows)
        self._launch(rows, self)
        return len(rows)

    async def _claim_loop(self) -> None:
        # One lane per claim that may be in flight: a lane whose claim returns goes on to the
        # next at once; a wakeup during its claim sends another lane's.
        cap = self.config.claim_batch_size or self.config.concurrency
        self._halt = False
        self._in_flight = self._reserved = 0
        self._more, self._delay, self._poll_at = True, 0.05, None
        lanes = [
            asyncio.create_task(self._lane(cap, timed=i == 0), name=f"wai-claims-{self.name}-{i}")
            for i in range(CLAIMS_IN_FLIGHT)
        ]
        try:
            await asyncio.wait(lanes, return_when=asyncio.FIRST_EXCEPTION)
        except asyncio.CancelledError:
            for lane in lanes:
                lane.cancel()
            raise
        finally:
            # The other lanes end after their claim in flight: its rows start.
            self._halt = True
            self._signal.set()
            await asyncio.wait(lanes)
        for lane in lanes:
            lane.result()  # an unexpected error restarts the loop (supervise)

    async def _lane(self, cap: int, *, timed: bool) -> None:
        while not (self._stopping or self._halt):
            room = self._room()
            most = self._most_in_flight()
            poll_at = self._poll_at
            # NOTIFY is only a wakeup: an idle queue is polled anyway (one claim).
            woken = self._wake.is_set() or (poll_at is not None and time.monotonic() >= poll_at)
            limit = claim_limit(
                room,
                cap=cap,
                in_flight=self._in_flight,
                most=most,
                backlog=self._more,
                woken=woken,
            )
            if not limit:
                self._signal.clear()
                # Freed slots wake the lanes only once a claim could use them.
                self._awaiting_slots = claim_due(
                    in_flight=self._in_flight, most=most, backlog=self._more, woken=woken
                )
                if not timed or self._in_flight or room <= 0:
                    await self._signal.wait()
                    continue
                if poll_at is None:
                    # While LISTEN delivers, each empty claim lets the next poll wait longer.
                    poll_at = self._poll_at = time.monotonic() + next_wait(
                        self._poll_interval,
                        cap=self._idle_cap,
                        idle=self._idle,
                        listening=self._listening(),
                    )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        self._signal.wait(), max(0.0, poll_at - time.monotonic())
                    )
                continue
            # Cleared before the claim, so a NOTIFY that arrives during it sends the next.
            self._wake.clear()
            self._poll_at = None
            self._awaiting_slots = False
            self._reserved += limit
            self._in_flight += 1
            try:
                took = await self._send(limit)
            finally:
                self._in_flight -= 1
                self._signal.set()  # another lane may claim now
            if took is None:
                await asyncio.sleep(self._delay)
                self._delay = min(self._delay * 2, self._poll_interval * 5)
                self._more = True
                continue
            self._delay = 0.05
            self._more = took == limit
            wait = claim_wait(self.flow, wanted=limit, claimed=took)
            if wait is not None:
                # Flow control capped the claim, not the queue's jobs: look again when it
                # may let more through. The wait stands for the claim it defers: no other
                # lane claims meanwhile.
                self._in_flight += 1
                try:
                    await self._hold(min(wait, self._poll_interval))
                finally:
                    self._in_flight -= 1
                    self._signal.set()
                self._more = True
            elif self._burst and not took and not self._in_flight:
                if not await self._last_look():
                    self._halt = True  # the queue is drained: every lane ends
                    self._signal.set()
                    return
                self._more = True

    async def _last_look(self) -> bool:
        """Burst mode, after an empty claim with none in flight: running attempts may still
        make work available here (a follow-up, say), so look once more after their outcomes
        are written. Whether that look found a job (and started it)."""
        while self.running or self.finishing:
            self._freed.clear()
            await self._freed.wait()
        if self._stopping:
            return False
        self._reserved += 1
        took = await self._send(1)
        return bool(took) or took is None
