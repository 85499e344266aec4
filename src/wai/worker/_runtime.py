"""The runtime of one worker process: producers, executor tasks, finalizer, heartbeats."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from wai import _db_async as db
from wai._context import AttemptState
from wai._followups import Applied
from wai._gauges import DatabaseGauges, pool_gauges
from wai._health import LAG_TICK, LoopLag, RuntimeHealth
from wai._job import JobRow, JobState
from wai._logging import emit, job_extra, jobs_extra
from wai._metrics import METRICS
from wai._outcomes import Outcome, decide, describe_exception
from wai._pace import IdlePace, Wakeups
from wai._queues import QueueConfig, QueueSettings
from wai._tracing import otel
from wai.callbacks import _queries_async as callback_db
from wai.maintenance import (
    Aging,
    Analyzer,
    Cleaner,
    CronFirer,
    DepthSampler,
    Elector,
    InstanceReaper,
    OutboxSweeper,
    PeriodicService,
    Promoter,
    Reindexer,
    Rescuer,
    new_instance_id,
)
from wai.maintenance._service import stop_tasks
from wai.worker import _queries as worker_db
from wai.worker._announcer import Announcer
from wai.worker._attempt_callbacks import AttemptCallbacks
from wai.worker._executor import execute, interrupted_outcome, shutdown_outcome
from wai.worker._finalizer import Finalizer
from wai.worker._heartbeat import Heartbeater
from wai.worker._hooks import HookDispatcher
from wai.worker._joblog import log_written
from wai.worker._measure import record_committed, runtime_gauges
from wai.worker._notifier import Notifier, parse_cancel
from wai.worker._producer import QueueProducer
from wai.worker._records import Recorder
from wai.worker._settings import RuntimeSettings
from wai.worker._throughput import ThroughputRecorder

if TYPE_CHECKING:
    from wai._client_base_async import AsyncClientBase

__all__ = ["Runtime"]

logger = logging.getLogger("wai.worker")


class Runtime:
    """Runs the queues of one client in the current event loop until shut down."""

    def __init__(
        self,
        client: AsyncClientBase,
        queues: dict[str, QueueConfig],
        settings: RuntimeSettings,
    ) -> None:
        self.client = client
        self.queues = queues
        self.settings = settings
        self.attempts: dict[tuple[int, int], AttemptState] = {}
        self.producers: dict[str, QueueProducer] = {}
        self.stopped = False
        #: Attempts whose outcome this process wrote (or gave up on) since it started.
        self.finished = 0
        #: Set by :meth:`interrupt`: running attempts were stopped, not waited for.
        self.interrupted = False
        self._started_at = time.monotonic()
        self._stopping = asyncio.Event()
        self._handlers: dict[asyncio.Task[None], tuple[JobRow, AttemptState]] = {}
        self._background: dict[str, asyncio.Task[None]] = {}
        self._producer_tasks: dict[str, asyncio.Task[None]] = {}
        self._lag = LoopLag()
        self._threads: ThreadPoolExecutor | None = None
        self._finalizer: Finalizer | None = None
        self.elector: Elector | None = None
        self.heartbeater: Heartbeater | None = None
        self.notifier: Notifier | None = None
        self.instance_id = new_instance_id()  # also the leader id: one id per runtime
        self.recorder = Recorder(self)
        self.throughput: ThroughputRecorder | None = None
        self.announcer: Announcer | None = None
        self.hooks = HookDispatcher(client.registry)
        #: Set by notes on ``<schema>.due``: wakes promotion and cron (wai._pace).
        self.due = Wakeups()
        #: Set by notes on ``<schema>.outbox``: wakes the outbox sweeper.
        self.outbox_due = Wakeups()
        self.sweeper: OutboxSweeper | None = None
        self.gauges: DatabaseGauges | None = None
        self._unregister: list[Callable[[], None]] = []
        self.callbacks = AttemptCallbacks(
            client.pool,
            client.schema,
            settings.poll_interval,
            registry=client.registry,
            hooks=self.hooks,
        )

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Check the schema, then start every loop in the background."""
        client = self.client
        try:
            await client.check_schema()
            await self._store_queue_settings()
            await self._store_specs()
            await client.upsert_cron()
        except BaseException:
            self.stopped = True  # nothing started: the client may start again later
            raise
        pool = client.pool
        schema = client.schema
        total = sum(c.concurrency for c in self.queues.values())
        # A thread per slot of every queue, so a claimed `def` handler never waits for a thread.
        self._threads = ThreadPoolExecutor(max_workers=max(total, 4), thread_name_prefix="wai-job")
        self._finalizer = Finalizer(
            pool,
            schema,
            batch_size=self.settings.completion_batch_size,
            flush_interval=self.settings.completion_flush_interval,
            on_committed=self._committed,
            registry=client.registry,
            busy=self._running_handlers,
            writers=self.settings.completion_writers,
        )
        self.heartbeater = Heartbeater(
            pool, schema, self.settings.heartbeat_interval, self._beating
        )
        deadlines = {
            kind: task.deadline
            for kind, task in client.registry.tasks.items()
            if task.deadline is not None
        }
        for name, config in self.queues.items():
            self.producers[name] = QueueProducer(
                name,
                config,
                pool=pool,
                schema=schema,
                poll_interval=self.settings.poll_interval,
                burst=self.settings.burst,
                deadlines=deadlines,
                launch=self._launch,
                writers=self.settings.completion_writers,
                idle_cap=self.settings.idle_poll_interval,
                listening=self._delivering,
            )
        notifier = Notifier(
            client.listen_url or client.database_url,
            db.channel(schema),
            self._on_notify,
            self._wake_all,
            subscriptions={
                db.cancel_channel(schema): self._on_cancel,
                db.flow_channel(schema): self._on_flow,
                db.due_channel(schema): self._on_due,
                db.outbox_channel(schema): self._on_outbox,
                callback_db.callback_channel(schema): self.callbacks.notify,
            },
            on_lost=self._listen_lost,
            probe=self._send_probe,
            probe_channel=db.probe_channel(schema),
        )
        loops: list[tuple[str, Any]] = [
            ("hooks", self.hooks.run_forever()),
            ("finalizer", self._finalizer.run_forever()),
            ("heartbeat", self.heartbeater.run_forever()),
        ]
        if self.queues and not client.listen_url:
            emit(
                logger,
                logging.INFO,
                "wai: LISTEN is off (listen_url=''): queues are polled every %g s",
                self.settings.poll_interval,
            )
        elif self.queues or self.settings.maintenance:
            # A maintenance-only runtime claims nothing, but its promotion and cron
            # passes back off while idle only if notes can wake them.
            self.notifier = notifier
            loops.append(("notifier", notifier.run_forever()))
        self.announcer = Announcer(pool, schema)
        loops.append(("announcer", self.announcer.run_forever()))
        loops.append(("records", self.recorder.run_forever()))
        loops.append(("loop_lag", self._watch_lag()))
        self.throughput = ThroughputRecorder(
            pool, schema, interval=self.settings.throughput_interval
        )
        loops.append(("throughput", self.throughput.run_forever()))
        self.gauges = DatabaseGauges(client, interval=self.settings.metrics_interval)
        loops.append(("metrics", self.gauges.run_forever()))
        self._unregister = [
            METRICS.add_source(self.gauges.samples),
            METRICS.add_source(pool_gauges(pool)),
            METRICS.add_source(
                runtime_gauges(
                    in_flight=self._in_flight,
                    last_beat_at=lambda: (
                        self.heartbeater.last_beat_at if self.heartbeater else None
                    ),
                    started_at=time.monotonic(),
                    instance_id=self.instance_id,
                    is_leader=lambda: self.elector is not None and self.elector.is_leader,
                )
            ),
        ]
        if client.registry.specs:  # not leader-gated: any process with the specs dispatches
            self.sweeper = OutboxSweeper(
                pool,
                schema,
                client.registry,
                interval=self.settings.outbox_interval,
                max_attempts=self.settings.outbox_max_attempts,
                pace=IdlePace(self.settings.idle_poll_interval, self._delivering, self.outbox_due),
            )
            loops.append(("outbox", self.sweeper.run_forever()))
        if self.settings.maintenance:
            self.elector = Elector(
                pool,
                schema,
                interval=self.settings.election_interval,
                services=self._services,
                leader_id=self.instance_id,
            )
            loops.append(("elector", self.elector.run_forever()))
        self._background = {n: asyncio.create_task(coro, name=f"wai-{n}") for n, coro in loops}
        self._producer_tasks = {
            p.name: asyncio.create_task(p.run_forever(), name=f"wai-queue-{p.name}")
            for p in self.producers.values()
        }
        if self.settings.burst:
            asyncio.create_task(self._watch_burst())  # noqa: RUF006 - ends with the producers
        if self.notifier is not None:
            try:
                # Bounded: start() must not hang on LISTEN; the claim loops poll until it connects.
                await asyncio.wait_for(notifier.connected.wait(), 5)
            except TimeoutError:
                emit(logger, logging.WARNING, "wai: LISTEN not ready after 5 s; relying on polling")
        await self.recorder.refresh()  # the record exists once start() returns
        self._started_at = time.monotonic()
        self._log_started()

    def _log_started(self) -> None:
        if not logger.isEnabledFor(logging.INFO):
            return
        queues = {name: config.concurrency for name, config in self.queues.items()}
        served = ", ".join(f"{n}={c}" for n, c in queues.items()) or "none (maintenance only)"
        emit(
            logger,
            logging.INFO,
            "worker started: queues %s; schema %r; instance %s; maintenance %s",
            served,
            self.client.schema,
            self.instance_id,
            "on" if self.settings.maintenance else "off",
            extra={
                "instance_id": self.instance_id,
                "schema": self.client.schema,
                "queues": queues,
                "maintenance": self.settings.maintenance,
            },
        )

    async def _store_queue_settings(self) -> None:
        # QueueConfig(retention=..., priority_aging=..., dlq=...) lands in the queues table,
        # where the maintenance leader and every process that fails a job read it.
        every = (QueueSettings.of(n, c, dlq=self.settings.dlq) for n, c in self.queues.items())
        settings = [s for s in every if not s.empty]
        if settings:
            async with self.client.pool.connection() as conn:
                await worker_db.queue_settings_upsert(conn, self.client.schema, settings)
        # Sorted: runtimes that start together lock the same rows in the same order.
        kind_limits = sorted(
            (name, kind, limit)
            for name, config in self.queues.items()
            for kind, limit in (config.kind_rate_limits or {}).items()
        )
        if kind_limits:
            async with self.client.pool.connection() as conn:
                await worker_db.kind_limits_upsert(conn, self.client.schema, kind_limits)

    async def _store_specs(self) -> None:
        # The (kind, outcome) pairs this process can dispatch, remembered for good: outbox
        # retention never deletes a row that some deployment registered a spec for.
        # Sorted: runtimes that start together lock the same rows in the same order (no deadlock).
        pairs = sorted(self.client.registry.specs)
        if pairs:
            async with self.client.pool.connection() as conn:
                await worker_db.followup_specs_upsert(conn, self.client.schema, pairs)

    def _services(self) -> Sequence[PeriodicService]:
        # In the order a new leader starts them (Elector: over its first seconds): what
        # jobs wait on first (due jobs, a dead process's attempts, cron), then the records
        # and samples, then the housekeeping that reads or rewrites the most.
        return [
            Promoter(
                self.client.pool,
                self.client.schema,
                interval=self.settings.promote_interval,
                batch_size=self.settings.promote_batch_size,
                pace=self._pace(),
            ),
            Rescuer(
                self.client.pool,
                self.client.schema,
                interval=self.settings.rescue_interval,
                staleness=self.settings.heartbeat_staleness,
                deadline_grace=self.settings.heartbeat_interval,
                on_rescued=self._rescued,
            ),
            CronFirer(
                self.client.pool,
                self.client.schema,
                interval=self.settings.cron_interval,
                pace=self._pace(),
            ),
            InstanceReaper(
                self.client.pool,
                self.client.schema,
                interval=self.settings.record_interval,
                record_interval=self.settings.record_interval,
            ),
            Aging(self.client.pool, self.client.schema, interval=self.settings.aging_interval),
            DepthSampler(
                self.client.pool, self.client.schema, interval=self.settings.depth_interval
            ),
            Analyzer(self.client.pool, self.client.schema, interval=self.settings.analyze_interval),
            Cleaner(
                self.client.pool,
                self.client.schema,
                interval=self.settings.cleanup_interval,
                completed=self.settings.completed_retention,
                failed=self.settings.failed_retention,
                cancelled=self.settings.cancelled_retention,
                outbox=self.settings.outbox_retention,
                dlq=self.settings.dlq_retention,
            ),
            Reindexer(
                self.client.pool,
                self.client.schema,
                interval=self.settings.reindex_interval,
                url=self.client.listen_url,
            ),
        ]

    def _pace(self) -> IdlePace:
        return IdlePace(self.settings.idle_poll_interval, self._delivering, self.due)

    def _rescued(self, rows: Sequence[tuple[JobRow, str]]) -> None:
        for row, reason in rows:
            METRICS.rescued.add((row.queue, row.kind, reason))
        self.hooks.rescued(rows)
        if self.throughput is not None:
            self.throughput.rescued(rows)
        # An attempt rescued by this very process learns it at once, not at its next heartbeat.
        for row, _reason in rows:
            state = self.attempts.get((row.id, row.run_lease))
            if state is not None:
                state.cancelled.set()

    async def _watch_burst(self) -> None:
        await asyncio.gather(*(p.drained.wait() for p in self.producers.values()))
        assert self._finalizer is not None
        # Their outcomes too: a burst run ends with nothing left to write.
        await self._finalizer.wait_idle()
        self._stopping.set()

    @property
    def stopping(self) -> bool:
        """Whether shutdown has begun (or burst mode ran out of work)."""
        return self._stopping.is_set()

    async def wait_stopping(self) -> None:
        """Return when shutdown begins (or burst mode ran out of work)."""
        await self._stopping.wait()

    def health(self) -> RuntimeHealth:
        """What ``client.health()`` reports of this runtime: its loops, leadership, lag."""
        burst = self.settings.burst
        claimers = {
            name: not task.done()
            # burst mode: a claim loop ends once its queue is empty, as it should
            or (burst and not task.cancelled() and task.exception() is None)
            for name, task in self._producer_tasks.items()
        }
        started = bool(self._background)
        return RuntimeHealth(
            instance_id=self.instance_id,
            running=started and not self.stopping and not self.stopped,
            stopping=self.stopping,
            claimers=claimers,
            leader=self.elector is not None and self.elector.is_leader,
            in_flight=len(self.attempts),
            background={name: not task.done() for name, task in self._background.items()},
            listening=self.listening,
            loop_lag=self._lag.worst(time.monotonic()),
        )

    async def _watch_lag(self) -> None:
        # A tick every LAG_TICK seconds: how late each one runs is how late the loop runs
        # everything else (claims, heartbeats, outcome writes).
        while True:
            self._lag.expect(time.monotonic() + LAG_TICK)
            await asyncio.sleep(LAG_TICK)
            self._lag.ticked(time.monotonic())

    @property
    def running(self) -> int:
        """Attempts whose handler is running now."""
        return len(self._handlers)

    def interrupt(self) -> None:
        """Stop the running attempts now instead of waiting for them (a second Ctrl-C).

        Each is cancelled and recorded as ``retryable`` at once, its attempt counted,
        with the error "worker interrupted ...": written by the finalizer like any
        outcome, so fenced by the attempt's run lease, and nothing waits for rescue.
        A :meth:`shutdown` under way then returns as soon as those outcomes are written.
        """
        if self.stopped or self.interrupted:
            return
        self.interrupted = True
        self._stopping.set()
        for p in self.producers.values():
            p.stop()
        # Cancelled on the next turn of the loop: a task created this turn has started
        # by then (a task cancelled before its first step would skip _run_attempt's
        # handling and write no outcome). Attempts launched later see ``interrupted``.
        running = list(self._handlers)
        asyncio.get_running_loop().call_soon(_cancel_all, running)

    async def shutdown(self, timeout: float) -> None:
        """Stop claiming, give running attempts ``timeout`` seconds, then stop everything."""
        if self.stopped:
            return
        began = time.monotonic()
        self._stopping.set()
        for p in self.producers.values():
            p.stop()
        # No claim is in flight after this: every attempt that will run is in _handlers.
        await asyncio.gather(*self._producer_tasks.values(), return_exceptions=True)
        for _, state in self._handlers.values():
            state.cancelled.set()
        running = len(self._handlers)
        late: set[asyncio.Task[None]] = set()
        if self._handlers:
            _, late = await asyncio.wait(list(self._handlers), timeout=timeout)
            for t in late:
                t.cancel()
            if late:
                # A cancelled handler still submits its outcome (_run_attempt): wait briefly for it.
                await asyncio.wait(late, timeout=5)
        if self._finalizer is not None:
            # A second Ctrl-C means "stop now": a short wait for the outcomes it recorded.
            bound = 5.0 if self.interrupted else max(timeout, 5)
            try:
                await asyncio.wait_for(self._finalizer.wait_idle(), timeout=bound)
            except TimeoutError:
                # Every attempt whose outcome is not committed: queued or being written.
                unwritten = [state.row for state in self.attempts.values()]
                emit(
                    logger,
                    logging.WARNING,
                    "wai: %d outcomes unwritten at shutdown; rescue will recover those jobs",
                    len(unwritten),
                    extra=jobs_extra(unwritten),
                )
        # stop_tasks re-cancels a loop that absorbed its cancel
        await stop_tasks(list(self._background.values()))
        for unregister in self._unregister:
            unregister()  # a stopped runtime's gauges are not reported
        self._unregister = []
        if self.throughput is not None:
            await self.throughput.close()  # the counts of the last seconds, rescues included
        # After the record loop stopped, which would otherwise write the record again.
        await self.recorder.delete()
        if self._threads is not None:
            # Not waited for: a def handler's thread cannot be stopped; queued calls never start.
            self._threads.shutdown(wait=False, cancel_futures=True)
        self.stopped = True
        self._log_stopped(began, running, len(late), timeout)

    def _log_stopped(self, began: float, running: int, late: int, timeout: float) -> None:
        if not logger.isEnabledFor(logging.INFO):
            return
        now = time.monotonic()
        if running == 0:
            attempts = "no attempt was running"
        elif self.interrupted:
            attempts = f"{_attempts(running)} interrupted, recorded as retryable"
        elif late:
            attempts = (
                f"{running - late} of {_attempts(running)} finished in time; "
                f"{late} went back to available after {timeout:g} s"
            )
        else:
            attempts = f"{_attempts(running)} finished in time"
        emit(
            logger,
            logging.INFO,
            "worker stopped after %.1f s: %s finished; shutdown took %.1f s (%s)",
            now - self._started_at,
            _attempts(self.finished),
            now - began,
            attempts,
            extra={
                "instance_id": self.instance_id,
                "finished": self.finished,
                "uptime": round(now - self._started_at, 3),
                "shutdown_seconds": round(now - began, 3),
                "interrupted": self.interrupted,
            },
        )

    # -- attempts ---------------------------------------------------------------------

    def _launch(self, rows: Sequence[JobRow], producer: QueueProducer) -> None:
        """Start an attempt on each row of one claim.

        What a claim shares is done once per claim: the loop, whether tracing is on, the
        metrics' locks (one count and one set of latencies per queue and kind).
        """
        loop = asyncio.get_running_loop()
        traced = otel is not None and otel.active()
        callbacks, schema, flush = self.callbacks, self.client.schema, self._flush_progress
        claimed: dict[tuple[str, str], int] = {}
        latencies: dict[tuple[str, str], list[float]] = {}
        for row in rows:
            try:
                state = AttemptState(row, loop)
            except Exception:  # a bug guard: a row that cannot start costs only itself
                emit(
                    logger,
                    logging.ERROR,
                    "wai: job %s could not be started; it stays running until rescued",
                    row.id,
                    exc_info=True,
                    extra=job_extra(row),
                )
                producer.release()  # its slot, with nothing to write
                producer.finalized()
                continue
            state.flush = flush
            state.callbacks = callbacks
            state.schema = schema
            state.traced = traced
            self.attempts[(row.id, row.run_lease)] = state
            labels = (row.queue, row.kind)
            claimed[labels] = claimed.get(labels, 0) + 1
            if row.attempted_at is not None:
                waited = (row.attempted_at - row.run_at).total_seconds()
                latencies.setdefault(labels, []).append(waited)
            self.hooks.started(row)
            task = loop.create_task(self._run_attempt(row, state, producer))
            self._handlers[task] = (row, state)
        for labels, n in claimed.items():
            METRICS.claimed.add(labels, n)
        for labels, waits in latencies.items():
            METRICS.pickup_latency.observe_many(labels, waits)

    async def _run_attempt(self, row: JobRow, state: AttemptState, producer: QueueProducer) -> None:
        assert self._threads is not None
        assert self._finalizer is not None
        try:
            if self.interrupted:  # claimed as the worker was being interrupted
                raise asyncio.CancelledError
            outcome = await execute(
                row, state, self.client.registry, self._threads, producer.config.deadline
            )
        except asyncio.CancelledError:
            state.abandon()  # a sync handler blocked in wait_for_callback_sync stops too
            if self.interrupted:
                outcome = interrupted_outcome(row, state)
            else:
                outcome = shutdown_outcome(row, state)
        except Exception as exc:  # the executor never raises; this is a bug guard
            emit(
                logger,
                logging.ERROR,
                "wai: executor failed on job %s",
                row.id,
                exc_info=True,
                extra=job_extra(row),
            )
            outcome = dataclasses.replace(
                shutdown_outcome(row, state), error=f"worker error: {describe_exception(exc)}"
            )
        finally:
            state.finished = time.monotonic()
            producer.release()
            if state.overrun is not None:
                emit(
                    logger,
                    logging.WARNING,
                    "wai: job %s: its handler's thread runs on past the deadline and keeps "
                    "its slot of queue %r until it returns (check job.is_cancelled())",
                    row.id,
                    producer.name,
                    extra=job_extra(row),
                )
                producer.hold(state.overrun)
            # Freed when the outcome is written: claims never outrun the finalizer (free_slots).
            state.release = producer.finalized
            self._handlers.pop(asyncio.current_task(), None)  # type: ignore[arg-type]
        if outcome.by_caller:
            await self._confirm_caller(outcome, state)
            return
        self._finalizer.submit(outcome, state)

    async def _confirm_caller(self, outcome: Outcome, state: AttemptState) -> None:
        """A ``completion="caller"`` handler completed its job in its own transaction:
        read the row to learn whether that committed, and write nothing if it did."""
        assert self._finalizer is not None
        try:
            async with self.client.pool.connection() as conn:
                row = await db.job_get_attempt(
                    conn, self.client.schema, state.job_id, state.run_lease
                )
        except Exception as exc:  # unreachable now: the worker's guarded write settles it
            emit(
                logger,
                logging.WARNING,
                "wai: job %s: could not read back its caller's completion (%s)",
                state.job_id,
                exc,
                extra=job_extra(state.row),
            )
            row = None
        if row is not None and row.state is JobState.COMPLETED:
            applied = Applied(rows=[row], written={row.id})
            self._committed([(outcome, state)], applied)
            log_written([(outcome, state)], applied.rows, {})
            return
        # Not committed (the caller's transaction rolled back, or is still open): a failed
        # attempt, under the same guard as any outcome; a completion that commits first wins.
        failure = dataclasses.replace(
            decide(
                job_id=state.job_id,
                run_lease=state.run_lease,
                attempt=state.attempt,
                max_attempts=state.max_attempts,
                exc=RuntimeError(
                    "job.complete_in(tx) was called but its transaction did not commit"
                ),
            ),
            trace=outcome.trace,
        )
        self._finalizer.submit(failure, state)

    def _committed(self, batch: Sequence[tuple[Outcome, AttemptState]], applied: Applied) -> None:
        self.finished += len(batch)
        for outcome, state in batch:
            self.attempts.pop((outcome.job_id, outcome.run_lease), None)
            release, state.release = state.release, None
            if release is not None:
                release()
        self.hooks.committed(batch, applied.rows)
        capped = {
            queue
            for queue in {state.row.queue for _, state in batch}
            if (p := self.producers.get(queue)) is not None and p.capped_globally
        }
        if capped and self.announcer is not None:
            self.announcer.announce(capped)
        if self.throughput is not None:
            self.throughput.committed(batch, applied.written)
        record_committed(batch, applied)

    def _in_flight(self) -> dict[str, int]:
        counts = dict.fromkeys(self.producers, 0)
        for state in self.attempts.values():
            queue = state.row.queue
            counts[queue] = counts.get(queue, 0) + 1
        return counts

    def _running_handlers(self) -> int:
        return sum(p.running for p in self.producers.values())

    def _beating(self) -> list[AttemptState]:
        # Every attempt until its outcome is written or given up on (_committed drops
        # it): a finished one waiting on a slow finalizer must not look dead to rescue.
        # The heartbeater skips the rows the finalizer has locked, so never deadlocks.
        return list(self.attempts.values())

    async def _flush_progress(self, state: AttemptState) -> bool:
        assert self.heartbeater is not None
        live = await self.heartbeater.beat([state], force=True)
        return state.job_id in live

    # -- wakeups ----------------------------------------------------------------------

    def _on_notify(self, queue: str) -> None:
        producer = self.producers.get(queue)
        if producer is not None:
            producer.wake()

    def _wake_all(self) -> None:
        # After a reconnect: notes sent while LISTEN was down are lost, limits' changes too.
        for p in self.producers.values():
            p.flow_changed()

    def _delivering(self) -> bool:
        return self.notifier is not None and self.notifier.delivering

    def _on_due(self, _payload: str) -> None:
        # A job became scheduled or retryable, or a cron schedule changed: promotion and
        # cron compute when they are next due again.
        self.due.set()

    def _on_outbox(self, _payload: str) -> None:
        # An outbox row was written or made due sooner: the sweeper looks again.
        self.outbox_due.set()

    def _listen_lost(self) -> None:
        # Loops backed off while idle must poll at their own interval again: wake them now,
        # they see LISTEN down when they compute their next wait.
        for p in self.producers.values():
            p.wake()
        self.due.set()
        self.outbox_due.set()

    async def _send_probe(self, channel: str, payload: str) -> None:
        async with self.client.pool.connection() as conn:
            await worker_db.notify(conn, self.client.schema, channel, payload)

    @property
    def listening(self) -> bool | None:
        """Whether the LISTEN connection is up; None when it serves no queue or LISTEN is
        off (a maintenance-only runtime listens for its own pace, not for health)."""
        if self.notifier is None or not self.queues:
            return None
        return self.notifier.connected.is_set()

    def _on_flow(self, payload: str) -> None:
        # A queue's limits changed: its claim loop reads them before its next claim.
        producer = self.producers.get(payload)
        if producer is not None:
            producer.flow_changed()

    def _on_cancel(self, payload: str) -> None:
        # An operator cancelled (or retried) a job: if that very attempt runs here, its
        # is_cancelled() flips now rather than at its next heartbeat.
        attempt = parse_cancel(payload)
        if attempt is None:
            return
        state = self.attempts.get(attempt)
        if state is not None:
            state.cancelled.set()
            self.callbacks.wake(attempt)  # a wait in place looks at its row now


def _cancel_all(tasks: Sequence[asyncio.Task[None]]) -> None:
    for task in tasks:
        task.cancel()


def _attempts(count: int) -> str:
    return f"{count} attempt{'' if count == 1 else 's'}"
