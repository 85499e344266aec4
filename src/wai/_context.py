"""The job context a handler receives: the row, decoded args, progress and cancellation."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar
from uuid import UUID

from psycopg import AsyncConnection, Connection

from wai import _db as db_sync
from wai import _db_async as db_async
from wai._job import JobRow, JobState, Trigger
from wai._kinds import dumps
from wai._logging import emit, job_extra
from wai._results import CallbackToken
from wai._storable import check_text
from wai.callbacks import CallbackExpressions, check_timeout, compile_expressions
from wai.errors import StaleAttempt, ValidationError

if TYPE_CHECKING:
    from wai._client_base import Transaction
    from wai._client_base_async import AsyncTransaction

__all__ = ["AttemptState", "CallbackOps", "Job"]

T = TypeVar("T")

logger = logging.getLogger("wai.worker")


class CallbackOps(Protocol):
    """What the worker runtime provides for a handler's callbacks (``wai.worker``)."""

    async def register(
        self, state: AttemptState, *, timeout: float, expressions: CallbackExpressions
    ) -> CallbackToken:
        """Write a fresh callback id under the attempt's lease guard."""
        ...

    async def wait(self, state: AttemptState, token: CallbackToken, timeout: float | None) -> Any:
        """Wait in place until ``resume_external`` hands over a payload."""
        ...


class _Flag:
    """A set-once flag shared across threads: ``set()`` and ``is_set()`` as on
    :class:`threading.Event`, without its condition variable, which would cost
    more to build than the rest of an attempt's bookkeeping. Nothing waits on it.
    """

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        """Raise the flag (a single store: atomic for readers on other threads)."""
        self._set = True

    def is_set(self) -> bool:
        """Whether the flag was raised."""
        return self._set


class AttemptState:
    """Mutable per-attempt bookkeeping shared by the handler, heartbeats and the finalizer."""

    #: The trace context of the attempt's span (:mod:`wai._otel`), for the follow-ups of
    #: the outcomes the attempt produces; None when it is not traced. A class default:
    #: untraced attempts never set it.
    trace: Mapping[str, str] | None = None
    #: Whether the attempt is traced: a tracer provider was set when it was claimed
    #: (:func:`wai._otel.active`, asked once per claim). A class default: off.
    traced = False

    def __init__(self, row: JobRow, loop: asyncio.AbstractEventLoop) -> None:
        #: The row as claimed: what the outcome's write is expected to change.
        self.row = row
        self.job_id = row.id
        self.run_lease = row.run_lease
        self.kind = row.kind
        self.attempt = row.attempt
        self.max_attempts = row.max_attempts
        self.started = time.monotonic()
        self.finished: float | None = None
        self.release: Callable[[], None] | None = None
        self.loop = loop
        self.cancelled = _Flag()
        # A copy: self.row stays the row as claimed. Progress wai did not write (anything
        # but an object, poked in by hand) counts as none: the next checkpoint replaces it.
        progress = row.progress
        self.progress: dict[str, Any] | None = (
            dict(progress) if progress and isinstance(progress, dict) else None
        )
        self.dirty = False
        # Progress is written from a def handler's thread and read by the loop's heartbeats.
        self.lock = threading.Lock()
        self.flush: Callable[[AttemptState], Coroutine[Any, Any, bool]] | None = None
        self.callbacks: CallbackOps | None = None
        #: The callback registered and not yet consumed by a wait (what a park needs).
        self.callback_id: UUID | None = None
        #: The timeout that registration set on the row (what a park keeps).
        self.callback_timeout_at: datetime | None = None
        #: Waits of a sync handler's thread, cancelled when the attempt is abandoned.
        self.sync_waits: set[concurrent.futures.Future[Any]] = set()
        self.abandoned = False
        #: The thread call of a ``def`` handler that outlived its deadline, still running.
        self.overrun: concurrent.futures.Future[Any] | None = None
        #: The schema of the job (set by the runtime): ``job.complete_in`` writes there.
        self.schema: str | None = None
        #: The kind completes in the handler's transaction (``completion="caller"``).
        self.caller_owned = False
        #: ``job.complete_in`` wrote the completion (in the caller's transaction, which
        #: may still roll back: the runtime reads the row once the handler returns).
        self.caller_completed = False

    def server_now(self) -> datetime:
        """The database server's clock now, as this attempt estimates it.

        The claim stamped ``attempted_at`` with the server's ``now()``; the time
        elapsed since, on this process's monotonic clock, is added to it. The
        worker's own wall clock, which may be skewed, plays no part.
        """
        attempted = self.row.attempted_at
        if attempted is None:  # not a claimed row (a test's hand-made state)
            return datetime.now(UTC)
        return attempted + timedelta(seconds=time.monotonic() - self.started)

    def abandon(self) -> None:
        """The attempt is over for the worker (deadline, shutdown): stop it cooperatively.

        ``is_cancelled()`` turns true and a sync handler blocked in
        ``wait_for_callback_sync`` gets :class:`wai.StaleAttempt` at once.
        """
        self.abandoned = True
        self.cancelled.set()
        for fut in list(self.sync_waits):
            fut.cancel()

    def progress_json(self, *, take: bool) -> str | None:
        """The progress as JSON when it changed since the last write (``take`` marks it written)."""
        with self.lock:
            if not self.dirty or self.progress is None:
                return None
            if take:
                self.dirty = False
            return self._encoded(self.progress)

    def current_progress_json(self) -> str | None:
        """The progress as JSON, changed or not (for the finalizing write)."""
        with self.lock:
            return self._encoded(self.progress) if self.progress is not None else None

    def _encoded(self, progress: dict[str, Any]) -> str | None:
        # set_progress and update_metadata check their input, so this fails only for
        # progress poked into by hand: it must cost that progress, never the heartbeat
        # of every attempt (one statement carries them all) nor the attempt's outcome.
        try:
            return dumps(progress, "progress")
        except ValidationError as exc:
            emit(
                logger,
                logging.WARNING,
                "wai: job %s: progress not written: %s",
                self.job_id,
                exc,
                extra=job_extra(self.row),
            )
            return None


class Job(Generic[T]):
    """What a handler receives: the claimed row's fields, ``args`` decoded, and controls.

    Row fields (``id``, ``kind``, ``queue``, ``attempt``, ``max_attempts``,
    ``run_lease``, ``metadata``, ``tags``, ``errors``, ``progress`` …) describe the
    job as claimed. ``is_cancelled()`` turns true when the job was cancelled,
    rescued, or the worker is shutting down: long handlers should check it.
    """

    def __init__(self, row: JobRow, args: T, state: AttemptState) -> None:
        self.row = row
        self.args = args
        self._state = state

    # -- row fields -------------------------------------------------------------------

    @property
    def id(self) -> int:
        """The job id."""
        return self.row.id

    @property
    def kind(self) -> str:
        """The job kind."""
        return self.row.kind

    @property
    def queue(self) -> str:
        """The queue the job was claimed from."""
        return self.row.queue

    @property
    def state(self) -> JobState:
        """Always ``running`` while the handler runs."""
        return self.row.state

    @property
    def priority(self) -> int:
        """1 (most urgent) to 4."""
        return self.row.priority

    @property
    def attempt(self) -> int:
        """This attempt's number, from 1."""
        return self.row.attempt

    @property
    def max_attempts(self) -> int:
        """The retry budget."""
        return self.row.max_attempts

    @property
    def run_lease(self) -> int:
        """The fencing token of this attempt."""
        return self.row.run_lease

    @property
    def run_at(self) -> datetime:
        """When the job became due."""
        return self.row.run_at

    @property
    def created_at(self) -> datetime:
        """When the job was inserted."""
        return self.row.created_at

    @property
    def attempted_at(self) -> datetime | None:
        """When this attempt started."""
        return self.row.attempted_at

    @property
    def deadline_at(self) -> datetime | None:
        """When this attempt's deadline passes, if it has one."""
        return self.row.deadline_at

    @property
    def errors(self) -> tuple[dict[str, Any], ...]:
        """Errors of earlier attempts, oldest first."""
        return self.row.errors

    @property
    def metadata(self) -> dict[str, Any]:
        """The metadata given at insert."""
        return self.row.metadata

    @property
    def tags(self) -> tuple[str, ...]:
        """The tags given at insert."""
        return self.row.tags

    @property
    def trigger(self) -> Trigger | None:
        """The trigger of a follow-up job."""
        return self.row.trigger

    @property
    def progress(self) -> dict[str, Any] | None:
        """The current progress checkpoint (kept across retries)."""
        with self._state.lock:
            return dict(self._state.progress) if self._state.progress else None

    # -- controls ---------------------------------------------------------------------

    def is_cancelled(self) -> bool:
        """True once the job was cancelled, rescued or the worker began shutting down."""
        return self._state.cancelled.is_set()

    def set_progress(self, percent: float, message: str | None = None) -> None:
        """Record progress (0-100); persisted with the next heartbeat or outcome.

        Raises :class:`wai.ValidationError` at once, recording nothing, when
        ``percent`` is not a number from 0 to 100 or ``message`` is not text
        PostgreSQL can store (a NUL byte, a lone surrogate).
        """
        if isinstance(percent, bool) or not isinstance(percent, int | float):
            raise ValidationError(f"progress percent: must be a number, got {percent!r}")
        if not 0 <= percent <= 100:  # NaN and infinities too
            raise ValidationError(f"progress percent: must be between 0 and 100, got {percent}")
        if message is not None:
            check_text(message, "progress message")
        with self._state.lock:
            current = self._state.progress or {}
            self._state.progress = {
                "percent": percent,
                "message": message,
                "metadata": current.get("metadata", {}),
            }
            self._state.dirty = True

    def update_metadata(self, values: Mapping[str, Any]) -> None:
        """Merge ``values`` into the progress metadata (kept across retries).

        Raises :class:`wai.ValidationError` at once, recording nothing, when a key
        or value (at any depth) is not JSON PostgreSQL can store: a NUL byte or a
        lone surrogate in a string, NaN or infinity, a non-JSON type.
        """
        if not isinstance(values, Mapping):
            raise ValidationError("progress metadata: update_metadata takes a dict")
        values = dict(values)
        dumps(values, "progress metadata")  # refuses, naming the path (wai._storable)
        with self._state.lock:
            current = self._state.progress or {"percent": None, "message": None, "metadata": {}}
            merged = {**current.get("metadata", {}), **values}
            self._state.progress = {**current, "metadata": merged}
            self._state.dirty = True

    async def flush_progress(self) -> bool:
        """Write pending progress now; False when this attempt is no longer live."""
        flush = self._state.flush
        if flush is None:
            return True
        return await flush(self._state)

    def flush_progress_sync(self) -> bool:
        """:meth:`flush_progress` for plain ``def`` handlers running in a worker thread."""
        flush = self._state.flush
        if flush is None:
            return True
        fut = asyncio.run_coroutine_threadsafe(flush(self._state), self._state.loop)
        return fut.result()

    # -- caller-owned completion (completion="caller") -----------------------------------

    async def complete_in(self, tx: AsyncTransaction | AsyncConnection[Any]) -> None:
        """Complete this job in ``tx``, the handler's own transaction (a
        ``client.transaction()`` or a psycopg ``AsyncConnection`` inside one), so the
        completion commits with the handler's rows or not at all.

        Raises :class:`wai.StaleAttempt` when the attempt is no longer this job's live
        one (rescued, cancelled, completed already): let it propagate, so that the
        transaction rolls back with nothing of this attempt's committed. Only for a kind
        registered with ``completion="caller"``; the worker then writes no outcome of its
        own once the completion committed (see docs/handlers.md).
        """
        state = self._caller_state()
        conn = tx if isinstance(tx, AsyncConnection) else tx.connection
        row = await db_async.job_complete_by_caller(
            conn, state.schema or "", self.id, self.run_lease
        )
        self._completed(state, row)

    def complete_in_sync(self, tx: Transaction | Connection[Any]) -> None:
        """:meth:`complete_in` for plain ``def`` handlers: ``tx`` is a
        ``client.transaction()`` of the sync :class:`wai.Client` or a psycopg
        ``Connection`` inside a transaction."""
        state = self._caller_state()
        conn = tx if isinstance(tx, Connection) else tx.connection
        row = db_sync.job_complete_by_caller(conn, state.schema or "", self.id, self.run_lease)
        self._completed(state, row)

    def _caller_state(self) -> AttemptState:
        state = self._state
        if state.schema is None:
            raise ValidationError("job.complete_in works only in a handler run by a wai worker")
        if not state.caller_owned:
            raise ValidationError(
                f"kind {self.kind!r} is completed by the worker: register it with "
                "completion='caller' to complete it in the handler's transaction"
            )
        return state

    def _completed(self, state: AttemptState, row: JobRow | None) -> None:
        if row is None:
            raise StaleAttempt(
                f"job {self.id}: attempt {self.attempt} (run lease {self.run_lease}) is no "
                "longer live (rescued, cancelled or completed already): roll back"
            )
        state.caller_completed = True

    # -- external callbacks -----------------------------------------------------------

    def _ops(self) -> CallbackOps:
        ops = self._state.callbacks
        if ops is None:
            raise ValidationError("callbacks work only in a handler run by a wai worker")
        return ops

    async def register_callback(
        self,
        timeout: float = 3600,
        *,
        filter: str | None = None,
        on_complete: str | None = None,
        on_fail: str | None = None,
        transform: str | None = None,
    ) -> CallbackToken:
        """Register an external callback for this attempt and return its token.

        The fresh ``token.id`` is written under the attempt's lease guard before
        this returns, so it can be handed to the outside world at once; a later
        call replaces it. ``timeout`` (seconds) bounds the wait: past it,
        maintenance rescues the parked job (retryable with backoff, or failed on
        its last attempt). ``filter``, ``on_complete``, ``on_fail`` and
        ``transform`` are CEL expressions over ``payload`` for
        ``resolve_callback`` (need ``wai[cel]``), checked here. Raises
        :class:`wai.StaleAttempt` when this attempt no longer owns the job.
        """
        seconds = check_timeout(timeout)
        expressions = compile_expressions(
            filter=filter, on_complete=on_complete, on_fail=on_fail, transform=transform
        )
        return await self._ops().register(self._state, timeout=seconds, expressions=expressions)

    def register_callback_sync(
        self,
        timeout: float = 3600,
        *,
        filter: str | None = None,
        on_complete: str | None = None,
        on_fail: str | None = None,
        transform: str | None = None,
    ) -> CallbackToken:
        """:meth:`register_callback` for plain ``def`` handlers running in a worker thread."""
        seconds = check_timeout(timeout)
        expressions = compile_expressions(
            filter=filter, on_complete=on_complete, on_fail=on_fail, transform=transform
        )
        coro = self._ops().register(self._state, timeout=seconds, expressions=expressions)
        return asyncio.run_coroutine_threadsafe(coro, self._state.loop).result()

    async def wait_for_callback(self, token: CallbackToken, timeout: float | None = None) -> Any:
        """Wait in place until ``resume_external(token.id, payload)``; return the payload.

        The attempt keeps its slot, run lease and heartbeat; the job shows as
        ``waiting_external`` meanwhile. Register a new callback for each further
        step. Raises :class:`TimeoutError` after ``timeout`` seconds (the job is
        ``running`` again and the callback stays registered), and
        :class:`wai.StaleAttempt` when the job moved on instead (completed,
        failed or retried by another resolution, cancelled, rescued on callback
        timeout).
        """
        if timeout is not None:
            timeout = check_timeout(timeout)
        return await self._ops().wait(self._state, token, timeout)

    def wait_for_callback_sync(self, token: CallbackToken, timeout: float | None = None) -> Any:
        """:meth:`wait_for_callback` for plain ``def`` handlers running in a worker thread."""
        if timeout is not None:
            timeout = check_timeout(timeout)
        state = self._state
        fut = asyncio.run_coroutine_threadsafe(self._ops().wait(state, token, timeout), state.loop)
        state.sync_waits.add(fut)
        if state.abandoned:  # abandoned before the wait was registered
            fut.cancel()
        try:
            return fut.result()
        except concurrent.futures.CancelledError:
            raise StaleAttempt(
                f"job {state.job_id}: the attempt was abandoned (deadline or shutdown) "
                "while waiting for its callback"
            ) from None
        finally:
            state.sync_waits.discard(fut)
