"""Writes attempt outcomes in batches: many outcomes and their follow-ups, one transaction."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg.errors import QueryCanceled, TransactionRollback
from psycopg_pool import AsyncConnectionPool

from wai._context import AttemptState
from wai._followups import Applied, error_text, plan_row
from wai._logging import emit, job_extra, jobs_extra
from wai._metrics import METRICS
from wai._outcomes import Outcome, decide, expected_row, stamped
from wai._registry import Registry
from wai._supervise import repeat
from wai._text import storable
from wai.errors import FollowUpError
from wai.transitions._finalize import Planned, apply_outcomes
from wai.worker._joblog import log_written

__all__ = ["Finalizer"]

logger = logging.getLogger("wai.worker")

Committed = Callable[[Sequence[tuple[Outcome, AttemptState]], Applied], None]


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
        then either finished or still ``running``, for rescue.) An unexpected error in
        the loop is logged and the loop goes on (:func:`wai._supervise.repeat`).
        """
        try:
            await repeat("finalizer", self._next_batch, interval=0)
        finally:
            writing = list(self._writing)
            for task in writing:
                task.cancel()
            await asyncio.gather(*writing, return_exceptions=True)

    async def _next_batch(self) -> None:
        await self._wake.wait()
        # Wait a little for more outcomes, unless no handler is running that could
        # add one: then nothing is gained by waiting, and every slot waits on it.
        if self._flush_interval and len(self._pending) < self._batch_size and self._busy() > 0:
            await asyncio.sleep(self._flush_interval)
        # A writer first, then the batch: outcomes that arrive while writers are busy join it.
        await self._slots.acquire()
        batch = self._pending[: self._batch_size]
        del self._pending[: self._batch_size]
        if not self._pending:
            self._wake.clear()
        if not batch:
            self._slots.release()
            self._settle()
            return
        task = asyncio.create_task(self._write_batch(batch))
        self._writing.add(task)
        task.add_done_callback(self._written)

    def _written(self, task: asyncio.Task[None]) -> None:
        self._writing.discard(task)
        self._slots.release()
        self._settle()

    def _settle(self) -> None:
        if not self._pending and not self._writing:
            self._idle.set()

    async def _write_batch(self, batch: list[tuple[Outcome, AttemptState]]) -> None:
        try:
            await self._write(await self._plan(batch))
        except Exception:  # a bug in wai itself: keep writing the next batches
            emit(
                logger,
                logging.ERROR,
                "wai: writing %d outcomes failed; those jobs stay running until rescued",
                len(batch),
                exc_info=True,
                extra=jobs_extra([state.row for _, state in batch]),
            )
            # Given up on: their slots free and their heartbeats stop, so rescue recovers the jobs.
            self._on_committed(batch, Applied())

    # -- planning: user closures run here, before any lock is taken ----------------------

    async def _plan(self, batch: list[tuple[Outcome, AttemptState]]) -> list[_Item]:
        specs_for = self._registry.specs_for
        # Most batches plan nothing: no thread hop for them.
        if not any(specs_for(state.kind, outcome.event) for outcome, state in batch):
            return [_Item(outcome, state) for outcome, state in batch]
        # Closures are user code: run them off the event loop, which keeps claiming,
        # heartbeating and writing other batches meanwhile.
        return await asyncio.to_thread(self._plan_all, batch)

    def _plan_all(self, batch: list[tuple[Outcome, AttemptState]]) -> list[_Item]:
        return [self._plan_one(outcome, state) for outcome, state in batch]

    def _plan_one(self, outcome: Outcome, state: AttemptState) -> _Item:
        """Evaluate ``outcome``'s follow-ups on the row its write is expected to commit.

        A failing spec replaces the outcome with a failed attempt naming it (retry with
        backoff, or exhausted), planned in turn; when that one's own specs fail too,
        they go to the outbox with it.
        """
        registry = self._registry
        if not registry.specs_for(state.kind, outcome.event):
            return _Item(outcome, state)
        try:
            outcome = stamped(outcome, state.server_now())
            expected = expected_row(
                state.row, outcome, callback_timeout_at=state.callback_timeout_at
            )
            jobs = plan_row(registry, expected, outcome)
        except FollowUpError as exc:
            failure = exc
        except Exception as exc:  # the outcome itself cannot be stamped (its delay)
            failure = FollowUpError(
                f"wai could not write this attempt's outcome ({outcome.event}): {error_text(exc)}"
            )
        else:
            return _Item(outcome, state, Planned(expected=expected, jobs=jobs))
        if outcome.followup_failure:
            return _Item(outcome, state, Planned(outbox=True))  # its own specs failed too
        emit(
            logger,
            logging.WARNING,
            "wai: job %s: %s; recording the attempt as failed",
            outcome.job_id,
            storable(str(failure)),
            extra=job_extra(state.row),
        )
        return self._plan_one(_failed_attempt(outcome, state, failure), state)

    # -- writing -------------------------------------------------------------------------

    async def _write(self, items: list[_Item]) -> None:
        """Write ``items``; what the database refuses costs only the outcome that caused it.

        A batch that fails for any reason other than an unreachable server is split in
        halves, each written on its own, down to the single outcome at fault, which is
        replaced by a failed attempt recording why (:meth:`_unwritable`).
        """
        try:
            applied = await self._apply(items)
        except Exception as exc:
            if len(items) == 1:
                await self._unwritable(items[0], exc)
                return
            half = len(items) // 2
            await self._write(items[:half])
            await self._write(items[half:])
            return
        self._settle_applied(items, applied)

    async def _apply(self, items: Sequence[_Item]) -> Applied:
        """One transaction for ``items``, retried while the server cannot be reached."""
        outcomes = [item.outcome for item in items]
        planned = {item.outcome.job_id: item.plan for item in items if item.plan is not None}
        reads_row = self._registry.reads_row
        with_rows = bool(planned) or any(
            reads_row(item.state.kind, item.outcome.event) for item in items
        )
        delay = 0.05
        while True:
            try:
                async with self._pool.connection() as conn:
                    applied = await apply_outcomes(
                        conn,
                        self._schema,
                        self._registry,
                        outcomes,
                        with_rows=with_rows,
                        planned=planned,
                    )
            except _TRANSIENT as exc:
                # Safe to retry: had the lost write committed, the lease guard now matches nothing.
                if isinstance(exc, QueryCanceled):
                    raise  # a statement timeout: this batch, not the server
                emit(
                    logger,
                    logging.WARNING,
                    "wai: could not write %d outcomes (%s); retrying",
                    len(outcomes),
                    exc,
                    extra=jobs_extra([item.state.row for item in items]),
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            self.transactions += 1
            METRICS.batch_size.observe((), len(outcomes))
            return applied

    def _settle_applied(self, items: Sequence[_Item], applied: Applied) -> None:
        rejected = {outcome.job_id for outcome, _ in applied.rejected}
        written = [
            (item.outcome, item.state) for item in items if item.outcome.job_id not in rejected
        ]
        self._on_committed(written, applied)
        log_written(written, applied.rows, applied.dead_lettered)
        states = {item.outcome.job_id: item.state for item in items}
        for outcome, error in applied.rejected:
            # A spec failed on the committed row (or its follow-up insert failed): record
            # a failed attempt, written with the next batch.
            state = states[outcome.job_id]
            emit(
                logger,
                logging.WARNING,
                "wai: job %s: %s; recording the attempt as failed",
                outcome.job_id,
                storable(str(error)),
                extra=job_extra(state.row),
            )
            self.submit(_failed_attempt(outcome, state, error), state)

    async def _unwritable(self, item: _Item, exc: Exception) -> None:
        """Record a failed attempt for an outcome the database refused, written alone."""
        outcome, state = item.outcome, item.state
        if outcome.unwritable:
            emit(
                logger,
                logging.ERROR,
                "wai: job %s: recording why its outcome could not be written failed too "
                "(%s); it stays running until rescued",
                outcome.job_id,
                storable(error_text(exc)),
                exc_info=exc,
                extra=job_extra(state.row),
            )
            self._on_committed([(outcome, state)], Applied())
            return
        emit(
            logger,
            logging.ERROR,
            "wai: job %s: its %s outcome could not be written (%s); recording a failed attempt",
            outcome.job_id,
            outcome.event,
            storable(error_text(exc)),
            exc_info=exc,
            extra=job_extra(state.row),
        )
        error = storable(
            f"wai could not write this attempt's outcome ({outcome.event}): {error_text(exc)}"
        )
        failed = dataclasses.replace(
            decide(
                job_id=outcome.job_id,
                run_lease=outcome.run_lease,
                attempt=state.attempt,
                max_attempts=state.max_attempts,
                exc=OutcomeRefused(error),
            ),
            unwritable=True,
            followup_failure=True,  # its own specs go to the outbox if they fail
            trace=outcome.trace,
        )
        # Its specs are user code: planned off the event loop, as in _plan.
        item = await asyncio.to_thread(self._plan_one, failed, state)
        await self._write([item])


class OutcomeRefused(Exception):
    """Why an outcome could not be written (recorded as the attempt's error)."""


#: Errors after which the same write can succeed: the server or the connection, a
#: deadlock or serialization failure. (A statement timeout is an OperationalError too,
#: but the next try of the same batch would time out again.)
_TRANSIENT = (psycopg.OperationalError, TransactionRollback)


class _Item:
    """One outcome of a batch, its attempt, and the follow-ups planned for it (if any)."""

    __slots__ = ("outcome", "plan", "state")

    def __init__(self, outcome: Outcome, state: AttemptState, plan: Planned | None = None) -> None:
        self.outcome = outcome
        self.state = state
        self.plan = plan


def _failed_attempt(outcome: Outcome, state: AttemptState, error: FollowUpError) -> Outcome:
    """The failed attempt that records ``error`` in place of ``outcome``."""
    failure = decide(
        job_id=outcome.job_id,
        run_lease=outcome.run_lease,
        attempt=state.attempt,
        max_attempts=state.max_attempts,
        exc=error,
    )
    return dataclasses.replace(
        failure, progress=outcome.progress, followup_failure=True, trace=outcome.trace
    )
