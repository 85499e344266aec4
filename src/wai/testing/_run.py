"""run_job: one job, claimed by id, through the worker's executor and finalizer, committed.

Nothing here decides an outcome or writes a transition: the attempt runs in
:func:`wai.worker._executor.execute` and its outcome is written by a
:class:`wai.worker._finalizer.Finalizer` (follow-up planning, the guarded update, the
follow-up inserts, the dead-letter move, a failed spec recorded as a failed attempt), the
objects a worker uses. What a worker adds around them (claim loops, LISTEN, metrics,
its runtime record, maintenance) is left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from wai._context import AttemptState
from wai._followups import Applied
from wai._job import JobRow, JobState
from wai._outcomes import Outcome
from wai._translate import translate_errors
from wai.errors import InvalidStateError, JobNotFound, WaiError
from wai.events import JobEvent
from wai.testing import _queries as testing_db
from wai.worker._attempt_callbacks import AttemptCallbacks
from wai.worker._executor import execute, shutdown_outcome
from wai.worker._finalizer import Finalizer
from wai.worker._heartbeat import Heartbeater
from wai.worker._hooks import HookDispatcher

if TYPE_CHECKING:
    from wai._client_base_async import AsyncClientBase

__all__ = ["JobRun", "final_row", "followups_of", "run_existing", "run_job"]

#: How often a handler waiting in place for a callback looks at its row (no LISTEN here).
_CALLBACK_POLL = 0.05
#: How often the attempt's heartbeat is refreshed while its handler runs.
_HEARTBEAT = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRun:
    """What :func:`run_job` did: the outcome committed and what it enqueued.

    ``job`` is the row as committed, read again after the write (for a job the
    outcome moved to the dead-letter queue, the row it holds there, and
    ``dead_lettered`` is true). ``event`` is the outcome: ``"completed"``,
    ``"retried"``, ``"exhausted"``, ``"cancelled"``, ``"snoozed"`` or
    ``"waiting_for_callback"``; ``error`` its error text, if any. ``followups`` are
    the jobs inserted with that outcome, in the same transaction, oldest first.
    ``events`` are the ``on_event`` events delivered to the registered hooks.
    """

    job: JobRow
    event: str
    error: str | None
    followups: list[JobRow] = field(default_factory=list[JobRow])
    dead_lettered: bool = False
    events: list[JobEvent] = field(default_factory=list[JobEvent])

    @property
    def state(self) -> JobState:
        """The job's state after the outcome."""
        return self.job.state


async def run_job(
    client: AsyncClientBase,
    args: Any,
    *,
    kind: str | None = None,
    queue: str | None = None,
    **insert_options: Any,
) -> JobRun:
    """Insert a job for ``args`` and run it once, inline: its outcome and follow-ups.

    ``kind``, ``queue`` and ``insert_options`` are those of :meth:`wai.AsyncClient.insert`.
    The job must be available at once (no ``run_at`` in the future). See
    :func:`run_existing`, which runs it.
    """
    row = await client.insert(args, kind=kind, queue=queue, **insert_options)
    return await run_existing(client, row.id)


async def run_existing(client: AsyncClientBase, job_id: int, *, due_now: bool = False) -> JobRun:
    """Claim job ``job_id``, run one attempt of it and commit its outcome; what happened.

    The claim takes exactly that job, as a worker's claim would: it must be
    ``available`` and due, in a queue that is not paused, or
    :class:`wai.InvalidStateError` says why not. ``due_now=True`` first makes a
    ``scheduled`` or ``retryable`` job (a retry or snooze not yet due) available now,
    as the promoter does once its time has come. The handler registered for
    its kind runs through the worker's executor (deadline, ``def`` handlers in a
    thread, the ``wai.Job`` context with progress, cancellation and callbacks), and the
    worker's finalizer writes its outcome with its follow-ups and dead-letter move in
    one transaction. The ``on_event`` hooks of the registry run before this returns.
    No worker needs to run, and no other job is touched.
    """
    await client.open()
    schema, registry = client.schema, client.registry
    task = registry.tasks.get(await _kind_of(client, job_id))
    deadline = task.deadline if task is not None else None
    async with client.pool.connection() as conn:
        with translate_errors(schema):
            if due_now:
                await testing_db.job_make_due(conn, schema, job_id)
            row = await testing_db.job_claim_id(conn, schema, job_id, deadline=deadline)
    if row is None:
        raise await _not_claimable(client, job_id)

    hooks = _RecordingHooks(registry)
    state = AttemptState(row, asyncio.get_running_loop())
    state.callbacks = AttemptCallbacks(
        client.pool, schema, _CALLBACK_POLL, registry=registry, hooks=hooks
    )
    attempts = [state]
    heartbeater = Heartbeater(client.pool, schema, _HEARTBEAT, lambda: attempts)

    async def flush(s: AttemptState) -> bool:
        return s.job_id in await heartbeater.beat([s], force=True)

    state.flush = flush
    committed: list[tuple[Outcome, Applied]] = []

    def on_committed(batch: Sequence[tuple[Outcome, AttemptState]], applied: Applied) -> None:
        committed.extend((outcome, applied) for outcome, _ in batch)
        hooks.committed(batch, applied.rows)

    finalizer = Finalizer(
        client.pool,
        schema,
        batch_size=1,
        flush_interval=0,
        on_committed=on_committed,
        registry=registry,
        busy=lambda: 0,
    )
    loops = [
        asyncio.create_task(hooks.run_forever(), name="wai-testing-hooks"),
        asyncio.create_task(heartbeater.run_forever(), name="wai-testing-heartbeat"),
        asyncio.create_task(finalizer.run_forever(), name="wai-testing-finalizer"),
    ]
    threads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wai-testing-job")
    try:
        hooks.started(row)
        try:
            outcome = await execute(row, state, registry, threads, deadline)
        except asyncio.CancelledError:
            # The test was cancelled mid-attempt: the job goes back as a worker's
            # shutdown leaves it (available, attempt refunded), then the cancel goes on.
            state.abandon()
            state.finished = time.monotonic()
            finalizer.submit(shutdown_outcome(row, state), state)
            await finalizer.wait_idle()
            raise
        state.finished = time.monotonic()
        finalizer.submit(outcome, state)
        await finalizer.wait_idle()
        await hooks.wait_delivered()
    finally:
        for loop in loops:
            loop.cancel()
        for loop in loops:
            with contextlib.suppress(asyncio.CancelledError):
                await loop
        threads.shutdown(wait=False, cancel_futures=True)

    written = [(o, a) for o, a in committed if o.job_id in a.written]
    if not written:
        raise WaiError(
            f"job {job_id}: the outcome of its attempt could not be written (see the "
            "'wai.worker' log); the job is still running"
        )
    outcome, _applied = written[-1]  # the last: a failed spec is recorded after its outcome
    job, dead = await final_row(client, job_id)
    return JobRun(
        job=job,
        event=outcome.event,
        error=outcome.error,
        followups=await followups_of(client, job_id, row.run_lease),
        dead_lettered=dead,
        events=hooks.delivered_events,
    )


async def _kind_of(client: AsyncClientBase, job_id: int) -> str:
    job, _dead = await final_row(client, job_id)
    return job.kind


async def _not_claimable(client: AsyncClientBase, job_id: int) -> WaiError:
    """Why job ``job_id`` could not be claimed, as an error to raise."""
    job, dead = await final_row(client, job_id)
    if dead:
        return InvalidStateError(
            f"job {job_id} is in the dead-letter queue: retry it with retry_from_dlq({job_id}) "
            "first",
            state=job.state.value,
        )
    if job.state is JobState.AVAILABLE:
        paused = {q.name for q in await client.queue_stats() if q.paused}
        if job.queue in paused:
            return InvalidStateError(
                f"job {job_id} is in paused queue {job.queue!r}: resume_queue({job.queue!r}) "
                "to run it",
                state=job.state.value,
            )
        return InvalidStateError(
            f"job {job_id} is available but not due until {job.run_at.isoformat()}",
            state=job.state.value,
        )
    hint = ""
    if job.state in (JobState.SCHEDULED, JobState.RETRYABLE):
        hint = f" (due at {job.run_at.isoformat()}); pass due_now=True to run it now"
    return InvalidStateError(
        f"job {job_id} is {job.state.value}, not available: run_job claims only available, "
        f"due jobs{hint}",
        state=job.state.value,
    )


async def final_row(client: AsyncClientBase, job_id: int) -> tuple[JobRow, bool]:
    """Job ``job_id`` as committed, and whether it is in the dead-letter queue."""
    try:
        return await client.get_job(job_id), False
    except JobNotFound:
        try:
            entry = await client.get_dlq_entry(job_id)
        except JobNotFound:
            raise JobNotFound(f"no job with id {job_id}") from None
        return entry.job, True


async def followups_of(
    client: AsyncClientBase, job_id: int, run_lease: int | None = None
) -> list[JobRow]:
    """The jobs ``job_id``'s outcomes enqueued, oldest first; of one attempt if ``run_lease``."""
    rows = await client.list_jobs(trigger_job_id=job_id, limit=10_000)
    return [
        r
        for r in reversed(rows)
        if run_lease is None or (r.trigger is not None and r.trigger.run_lease == run_lease)
    ]


class _RecordingHooks(HookDispatcher):
    """The worker's hook dispatcher, counting what it queues to wait for its delivery."""

    def __init__(self, registry: Any) -> None:
        super().__init__(registry)
        self.emitted: list[JobEvent] = []
        self.delivered_events: list[JobEvent] = []

    def emit(self, event: JobEvent) -> None:
        """Queue ``event`` as the worker does, and remember it."""
        self.emitted.append(event)
        super().emit(event)

    async def wait_delivered(self, timeout: float = 30.0) -> None:
        """Return once every event queued so far went through every hook."""
        async with asyncio.timeout(timeout):
            # The dispatcher only counts what it delivered; it signals nothing to wait on.
            while self.delivered < len(self.emitted):  # noqa: ASYNC110
                await asyncio.sleep(0.005)
        self.delivered_events = list(self.emitted)
