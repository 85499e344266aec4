"""Delivers lifecycle events to ``on_event`` hooks after commit, off the job path."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Sequence

from wai._context import AttemptState
from wai._followups import decode_for
from wai._job import JobRow
from wai._logging import emit, job_extra
from wai._outcomes import Outcome
from wai._registry import Registry
from wai._supervise import supervise
from wai.events import (
    Cancelled,
    Completed,
    Exhausted,
    JobEvent,
    Rescued,
    Retried,
    Started,
    WaitingForCallback,
)

__all__ = ["HookDispatcher", "event_for"]

logger = logging.getLogger("wai.hooks")


def event_for(outcome: Outcome, row: JobRow, args: object, duration: float) -> JobEvent | None:
    """The event a committed outcome emits (snoozes emit none)."""
    match outcome.event:
        case "completed":
            return Completed(job=row, args=args, duration=duration)
        case "retried":
            return Retried(
                job=row,
                args=args,
                error=outcome.error or "",
                attempt=row.attempt,
                next_run_at=row.run_at,
            )
        case "exhausted":
            return Exhausted(job=row, args=args, error=outcome.error or "", attempt=row.attempt)
        case "cancelled":
            return Cancelled(job=row, args=args, reason=outcome.reason or "")
        case "waiting_for_callback":
            return WaitingForCallback(job=row, args=args)
        case _:
            return None


class HookDispatcher:
    """A queue of events consumed by one background task.

    Hooks run one after another in registration order; an ``async def`` hook is
    awaited, a plain one runs in a thread. An exception is logged and the next
    hook still runs. Events still queued when the process stops are lost.
    """

    def __init__(self, registry: Registry, *, max_queued: int = 100_000) -> None:
        self._registry = registry
        # Bounded: a slow hook costs dropped events (with a warning), never unbounded memory.
        self._queue: asyncio.Queue[JobEvent] = asyncio.Queue(max_queued)
        self.delivered = 0

    def wanted(self, kind: str) -> bool:
        """Whether any hook listens to ``kind``."""
        hooks = self._registry.hooks
        return bool(hooks and (hooks.get(kind) or hooks.get("*")))

    def emit(self, event: JobEvent) -> None:
        """Queue ``event``; dropped with a warning when the queue is full."""
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            name = type(event).__name__
            emit(
                logger,
                logging.WARNING,
                "wai: hook queue full; dropped %s of job %s",
                name,
                event.job.id,
                extra=job_extra(event.job, event=name),
            )

    def started(self, row: JobRow) -> None:
        """Emit ``Started`` for a claimed row, if anyone listens."""
        if self.wanted(row.kind):
            self.emit(Started(job=row, args=self._args(row)))

    def committed(
        self, items: Sequence[tuple[Outcome, AttemptState]], rows: Sequence[JobRow]
    ) -> None:
        """Emit the events of committed outcomes (rows the guard did not match emit none)."""
        if not rows:
            return
        by_id = {o.job_id: (o, s) for o, s in items}
        for row in rows:
            if not self.wanted(row.kind) or row.id not in by_id:
                continue
            outcome, state = by_id[row.id]
            duration = (state.finished or state.started) - state.started
            event = event_for(outcome, row, self._args(row), duration)
            if event is not None:
                self.emit(event)

    def waiting(self, row: JobRow) -> None:
        """Emit ``WaitingForCallback`` for a handler that started waiting in place."""
        if self.wanted(row.kind):
            self.emit(WaitingForCallback(job=row, args=self._args(row)))

    def resolved(self, outcome: Outcome, row: JobRow) -> None:
        """Emit the event of a callback resolution this process committed (duration 0)."""
        if self.wanted(row.kind):
            event = event_for(outcome, row, self._args(row), 0.0)
            if event is not None:
                self.emit(event)

    def rescued(self, rows: Sequence[tuple[JobRow, str]]) -> None:
        """Emit ``Rescued`` for rows this process rescued."""
        for row, reason in rows:
            if self.wanted(row.kind):
                self.emit(Rescued(job=row, args=self._args(row), reason=reason))

    def _args(self, row: JobRow) -> object:
        try:
            return decode_for(self._registry, row)
        except Exception:
            # A hook still gets its event when the args no longer decode: the raw JSON instead.
            return row.args

    async def run_forever(self) -> None:
        """Deliver events until cancelled; restarted after an unexpected error (the event
        being delivered then is lost, like any event of a best-effort hook)."""
        await supervise("on_event dispatcher", self._deliver)

    async def _deliver(self) -> None:
        while True:
            event = await self._queue.get()
            for hook in self._registry.hooks_for(event.job.kind):
                try:
                    if inspect.iscoroutinefunction(hook):
                        await hook(event)
                    else:
                        result = await asyncio.to_thread(hook, event)
                        # A plain callable may return a coroutine (a lambda around an async call).
                        if inspect.isawaitable(result):
                            await result
                except Exception:
                    name = type(event).__name__
                    emit(
                        logger,
                        logging.ERROR,
                        "wai: on_event hook %r failed on %s of job %s",
                        hook,
                        name,
                        event.job.id,
                        exc_info=True,
                        extra=job_extra(event.job, event=name),
                    )
            self.delivered += 1
