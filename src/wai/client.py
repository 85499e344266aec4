"""The public clients: :class:`AsyncClient` (workers, producer, admin) and :class:`Client`."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Mapping
from typing import Any

from wai._client_base import ClientBase
from wai._client_base_async import AsyncClientBase
from wai._group_commit import GroupCommit
from wai._health import RuntimeHealth
from wai._inserts import NewJob
from wai._job import JobRow
from wai._logging import emit, say
from wai._queues import QueueConfig, normalize_queues
from wai._registry import Registry
from wai.callbacks import Resolved
from wai.errors import ValidationError
from wai.worker import Runtime, RuntimeSettings

__all__ = ["AsyncClient", "Client"]

logger = logging.getLogger("wai.worker")


class AsyncClient(AsyncClientBase):
    """The async client: insert and manage jobs, and run workers in this event loop.

    ``AsyncClient(database_url, schema="wai", max_connections=10)``; the URL
    defaults to ``WAI_DATABASE_URL`` or ``DATABASE_URL``. Use it as an async
    context manager, or call :meth:`open` and :meth:`close`. ``group_commit=True``
    writes the :meth:`insert` calls that arrive together as one statement and one
    commit, each caller still getting its own row or error (``docs/inserting.md``).
    """

    _runtime: Runtime | None = None

    def __init__(
        self,
        database_url: str | None = None,
        *,
        schema: str = "wai",
        min_connections: int = 1,
        max_connections: int = 10,
        registry: Registry | None = None,
        prepared_statements: bool | None = None,
        listen_url: str | None = None,
        group_commit: bool = False,
    ) -> None:
        super().__init__(
            database_url,
            schema=schema,
            min_connections=min_connections,
            max_connections=max_connections,
            registry=registry,
            prepared_statements=prepared_statements,
            listen_url=listen_url,
        )
        if not isinstance(group_commit, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValidationError(f"group_commit must be True or False, got {group_commit!r}")
        #: Whether :meth:`insert` calls that arrive together share one statement and one
        #: commit (``docs/inserting.md#many-producers-at-once-group-commit``). Off by
        #: default: it suits many concurrent producers in one process, not a lone one.
        self.group_commit = group_commit
        self._group = GroupCommit(self.pool, self.schema) if group_commit else None

    async def _insert_built(self, job: NewJob) -> JobRow:
        if self._group is not None:
            return await self._group.insert(job)
        return await super()._insert_built(job)

    async def start(
        self, queues: Mapping[str, int | QueueConfig] | None = None, **runtime: Any
    ) -> None:
        """Start workers for ``queues`` in the background of the running event loop.

        ``queues`` maps a queue name to a concurrency or a :class:`wai.QueueConfig`;
        None serves every queue a task is registered on, and an empty mapping
        serves none: ``start({})`` runs a maintenance-only process (leader
        election, promotion, rescue, cleanup, aging; it claims nothing). Timings
        are keyword arguments in seconds: ``poll_interval``,
        ``heartbeat_interval``, ``heartbeat_staleness``, ``rescue_interval``,
        ``promote_interval``, ``election_interval``, ``record_interval``,
        ``cleanup_interval``, ``aging_interval``, ``cron_interval``,
        ``analyze_interval``, ``reindex_interval``, ``depth_interval``,
        ``throughput_interval``, and the
        retention defaults ``completed_retention``, ``failed_retention``,
        ``cancelled_retention``, ``outbox_retention`` (orphaned outbox rows
        only), ``dlq_retention``, and ``outbox_max_attempts`` (failed dispatches
        before an outbox row is marked failed; see
        :class:`wai.worker.RuntimeSettings`); ``dlq=True`` turns the
        dead-letter queue on for every served queue whose :class:`wai.QueueConfig`
        leaves it None; ``maintenance=False`` leaves
        promotion and the other leader-elected services to other processes;
        ``burst=True`` stops the workers once their queues are empty. The
        schedules registered with :meth:`periodic` are stored before it returns.
        """
        if self._runtime is not None and not self._runtime.stopped:
            raise ValidationError("this client's workers are already running")
        settings = RuntimeSettings(**runtime)
        configs = normalize_queues(queues, self.registry.queues())
        if not configs and not settings.maintenance:
            raise ValidationError(
                "no queues to serve and maintenance=False: nothing to run "
                "(pass queues, or maintenance=True for a maintenance-only process)"
            )
        self._runtime = Runtime(self, configs, settings)
        await self._runtime.start()

    async def run(
        self, queues: Mapping[str, int | QueueConfig] | None = None, **runtime: Any
    ) -> None:
        """Like :meth:`start`, then block until SIGTERM/SIGINT, :meth:`shutdown` or burst end.

        The first signal starts a graceful shutdown (``shutdown_timeout`` seconds,
        default 10); on SIGINT (Ctrl-C) a line on stderr says so. During it a further
        SIGTERM is ignored, and a second SIGINT stops at once: the running attempts
        are recorded as ``retryable`` (error "worker interrupted", attempt counted,
        fenced by their run lease like every outcome), the process's record is
        removed, and ``run`` raises :class:`KeyboardInterrupt`. A third SIGINT
        interrupts even that.
        """
        shutdown_timeout = float(runtime.pop("shutdown_timeout", 10.0))
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        received: list[signal.Signals] = []

        def on_signal(sig: signal.Signals) -> None:
            worker = self._runtime
            if not received:
                received.append(sig)
                stop.set()
            elif sig is signal.SIGINT and worker is not None and not worker.interrupted:
                _say(f"stopping now: interrupting {_jobs(worker.running)}")
                worker.interrupt()
                # the next Ctrl-C raises KeyboardInterrupt: nothing waits any more
                loop.remove_signal_handler(signal.SIGINT)
            # a repeated SIGTERM (say from both `wai worker --processes` and a service
            # manager) is ignored

        # Installed before the workers start: a signal while they start stops them too.
        installed: list[signal.Signals] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, on_signal, sig)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread, or not supported here
        try:
            await self.start(queues, **runtime)
            assert self._runtime is not None
            worker = self._runtime
            waiters = [
                asyncio.ensure_future(stop.wait()),
                asyncio.ensure_future(worker.wait_stopping()),
            ]
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()
                if received and not worker.interrupted:
                    _announce(received[0], worker.running, shutdown_timeout)
                await self.shutdown(timeout=shutdown_timeout)
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)  # False when already removed
        if worker.interrupted:
            raise KeyboardInterrupt

    async def shutdown(self, timeout: float = 10.0) -> None:
        """Stop claiming, let running jobs finish for up to ``timeout`` seconds, then stop.

        Jobs still running at the timeout are cancelled and put back to ``available``
        with their attempt refunded.
        """
        if self._runtime is not None:
            await self._runtime.shutdown(timeout)

    async def close(self) -> None:
        """Shut the workers down (if running) and close the pool."""
        await self.shutdown()
        if self._group is not None:
            await self._group.close()  # the inserts already queued are written first
        await super().close()

    def _runtime_health(self) -> RuntimeHealth | None:
        runtime = self._runtime
        if runtime is None or runtime.stopped:  # never started, failed to, or shut down
            return None
        return runtime.health()

    def _resolved(self, resolved: Resolved) -> None:
        # Hooks of a callback resolution fire in this process when it runs a runtime
        # (the hook dispatcher lives there); otherwise there is nowhere to run them.
        super()._resolved(resolved)
        runtime = self._runtime
        if runtime is not None and not runtime.stopped and resolved.outcome is not None:
            runtime.hooks.resolved(resolved.outcome, resolved.row)
            if runtime.throughput is not None:
                runtime.throughput.resolved(resolved.outcome, resolved.row)


def _jobs(count: int) -> str:
    return f"{count} running job{'' if count == 1 else 's'}"


def _say(message: str) -> None:
    """A line for the person at the terminal who pressed Ctrl-C (stderr; a JSON record
    when the command logs JSON: :func:`wai._logging.say`)."""
    say(message)


def _announce(sig: signal.Signals, running: int, timeout: float) -> None:
    """Say that a signal started the graceful shutdown, and what it waits for."""
    text = f"shutting down: waiting up to {timeout:g} s for {_jobs(running)}"
    if sig is signal.SIGINT:
        _say(f"{text} (Ctrl-C again to stop now)")
    else:
        emit(logger, logging.INFO, "%s received: %s", sig.name, text)


class Client(ClientBase):
    """The sync client: insert and manage jobs from Django, Flask or scripts.

    ``Client(database_url, schema="wai", max_connections=10)``; a context
    manager, or call :meth:`open` and :meth:`close`. Workers run on
    :class:`AsyncClient` or ``wai worker``.
    """
