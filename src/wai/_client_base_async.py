"""Producer and admin API shared by the async client (source of the sync client)."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, LiteralString, Self, TypeVar, overload

import psycopg
from psycopg import AsyncConnection, AsyncCursor
from psycopg_pool import AsyncConnectionPool

from wai import _db_async as db
from wai import _inserts_db_async as inserts_db
from wai._admin import (
    QueueDepth,
    QueueStats,
    ThroughputMinute,
    check_filter_id,
    check_job_id,
    check_time_range,
    parse_search,
)
from wai._bounded import bounded_async
from wai._connect import CONNECT_TIMEOUT, keepalives, unreachable
from wai._context import Job
from wai._flow import RateLimit, check_global_concurrency
from wai._health import DatabaseCheck, Health, RuntimeHealth, assess, check_timeout, first_line
from wai._inserts import EnqueueRequest, NewJob, build_args_job, build_job, validate_queue
from wai._instances import RuntimeInstance
from wai._job import JobRow, JobState
from wai._json import configure_async
from wai._kinds import check_int, kind_of_type
from wai._lineage import Lineage, assemble
from wai._metrics import METRICS
from wai._migrate import migrations
from wai._pool import AsyncStackPool
from wai._registration import (
    CancelledFn,
    CompletedFn,
    ExhaustedFn,
    KindOrType,
    RescuedFn,
    RetriedFn,
    TaskDecorator,
    register_hook,
    register_spec,
)
from wai._registry import Registry
from wai._sql import validate_schema
from wai._storable import check_text
from wai._translate import migrate_command, translate_errors
from wai._unique import UniqueOpts
from wai.callbacks import CallbackResolution, CallbackTimeout, Resolved, WaitingJob
from wai.callbacks._ops_async import AsyncCallbackOps
from wai.cron import Schedule
from wai.cron._ops_async import AsyncCronOps
from wai.dlq import DlqEntry
from wai.dlq import _queries_async as dlq_db
from wai.dlq._ops_async import AsyncDlqOps, Progress
from wai.errors import JobNotFound, NoDatabaseURL, SchemaNotMigrated, ValidationError
from wai.outbox import OutboxEntry, OutboxStats
from wai.outbox._ops_async import AsyncOutboxOps
from wai.transitions import _apply_async as transitions

__all__ = ["AsyncClientBase", "AsyncTransaction"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
R = TypeVar("R")


async def _unprepared_async(conn: AsyncConnection[Any]) -> None:
    """Pool ``configure`` hook of a client without prepared statements."""
    await configure_async(conn)
    conn.prepare_threshold = None


def _flag(value: bool | None, variable: str, name: str) -> bool:
    """``value``, else the environment variable ``variable`` (on unless 0/false/off/no)."""
    if value is not None:
        if not isinstance(value, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValidationError(f"{name} must be True, False or None, got {value!r}")
        return value
    text = os.environ.get(variable, "").strip().lower()
    return text not in ("0", "false", "off", "no")


def resolve_database_url(database_url: str | None) -> str:
    """The explicit URL, else ``WAI_DATABASE_URL``, else ``DATABASE_URL``."""
    url = database_url or os.environ.get("WAI_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if not url:
        raise NoDatabaseURL(
            "no database URL: pass one to the client or set WAI_DATABASE_URL or DATABASE_URL"
        )
    return url


def build_one(registry: Registry, request: EnqueueRequest) -> NewJob:
    """Validate one insert request against ``registry``."""
    return build_job(
        request,
        default_queue=registry.queue_of,
        default_max_attempts=registry.max_attempts_of,
    )


def build_many(registry: Registry, items: Iterable[Any]) -> list[NewJob]:
    """Validate many inserts against ``registry``; items are args or :class:`wai.EnqueueRequest`."""
    queue_of, max_attempts_of = registry.queue_of, registry.max_attempts_of
    return [
        build_one(registry, item)
        if isinstance(item, EnqueueRequest)
        else build_args_job(item, default_queue=queue_of, default_max_attempts=max_attempts_of)
        for item in items
    ]


#: The longest trigger chain :meth:`AsyncClientBase.lineage` walks up: far beyond any
#: chain of follow-ups a design would make, and a bound on a walk that reads one row a step.
_LINEAGE_UP = 1000


class AsyncTransaction:
    """A database transaction that business writes and job inserts share.

    Obtained from ``client.transaction()``; commits when the block exits
    normally and rolls back when it raises. ``after_commit`` callables run once it
    committed (the hooks of a callback resolved in it).
    """

    def __init__(self, client: AsyncClientBase, conn: AsyncConnection[Any]) -> None:
        self._client = client
        self.connection = conn
        self.after_commit: list[Callable[[], None]] = []

    async def execute(
        self, query: LiteralString, params: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> AsyncCursor[Any]:
        """Run a statement of your own inside the transaction."""
        return await self.connection.execute(query, params)

    async def insert(self, args: Any, **options: Any) -> JobRow:
        """Insert a job inside the transaction; same options as ``client.insert``."""
        job = build_one(self._client.registry, EnqueueRequest(args, **options))
        return await inserts_db.insert_one(self.connection, self._client.schema, job)

    async def insert_many(self, items: Iterable[Any]) -> list[JobRow]:
        """Insert many jobs inside the transaction; same items as ``client.insert_many``."""
        jobs = build_many(self._client.registry, items)
        return await inserts_db.insert_batch(self.connection, self._client.schema, jobs)

    async def copy_many(self, items: Iterable[Any]) -> int:
        """Bulk-load jobs inside the transaction; same items as ``client.copy_many``."""
        jobs = build_many(self._client.registry, items)
        return await inserts_db.copy_batch(self.connection, self._client.schema, jobs)


async def _read_ledger(conn: AsyncConnection[Any], schema: str, began: float) -> DatabaseCheck:
    """The applied migrations of ``schema`` on ``conn``; a broken connection raises
    :class:`psycopg.OperationalError`, any other database error is reported."""
    try:
        applied = await db.migrate_applied(conn, schema)
    except psycopg.OperationalError:
        raise
    except psycopg.Error as exc:  # it answered, refusing: say why (a privilege, say)
        return DatabaseCheck(
            answered=True, applied=None, error=first_line(exc), latency=time.monotonic() - began
        )
    return DatabaseCheck(
        answered=True, applied=frozenset(applied), error=None, latency=time.monotonic() - began
    )


class AsyncClientBase:
    """The methods both clients share: pool, registration, inserts, jobs and queues.

    Each feature's methods delegate to its package's operations object, built on
    this client as its core (:class:`wai._core_async.AsyncClientCore`): the
    dead-letter queue to :mod:`wai.dlq`, periodic schedules to :mod:`wai.cron`,
    the outbox to :mod:`wai.outbox`, callback resolutions to :mod:`wai.callbacks`.
    """

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
    ) -> None:
        self.database_url = resolve_database_url(database_url)
        #: Whether psycopg prepares the statements this client runs often (its default);
        #: off behind a transaction-pooling PgBouncer (docs/deployment.md). None: the
        #: ``WAI_PREPARED_STATEMENTS`` environment variable (``0``/``false``/``off``), else on.
        self.prepared_statements = _flag(
            prepared_statements, "WAI_PREPARED_STATEMENTS", "prepared_statements"
        )
        #: Where a worker's LISTEN connection goes: a session connection, never through a
        #: transaction pooler. None: ``WAI_LISTEN_URL``, else the database URL; ``""``
        #: (also from the variable): no LISTEN, the queues are polled.
        self.listen_url = listen_url if listen_url is not None else os.environ.get("WAI_LISTEN_URL")
        if self.listen_url is None:
            self.listen_url = self.database_url
        self.schema = validate_schema(schema)
        self.registry = registry if registry is not None else Registry()
        if not 1 <= min_connections <= max_connections:
            raise ValidationError(
                f"need 1 <= min_connections <= max_connections, got "
                f"{min_connections} and {max_connections}"
            )
        self.pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncStackPool(
            self.database_url,
            min_size=min_connections,
            max_size=max_connections,
            # Autocommit: a lone statement commits by itself; multi-statement work opens a
            # transaction explicitly (conn.transaction()). UTF-8 whatever the URL's options
            # or PGCLIENTENCODING say: args and metadata are decoded as UTF-8 JSON, and the
            # single insert sends UTF-8 text (wai._direct_async). TCP keepalives: a connection
            # may sit idle at the bottom of the pool's stack for minutes (wai._pool).
            kwargs={"autocommit": True, "client_encoding": "UTF8", **keepalives(self.database_url)},
            configure=configure_async if self.prepared_statements else _unprepared_async,
            open=False,
            name=f"wai-{self.schema}",
        )
        self._opened = False
        self._dlq = AsyncDlqOps(self)
        self._cron = AsyncCronOps(self)
        self._outbox = AsyncOutboxOps(self)
        self._callbacks = AsyncCallbackOps(self, self._resolved)

    async def open(self) -> None:
        """Open the connection pool (done for you on first use).

        The first connection is made at once: an unreachable server or a missing
        database raises :class:`wai.DatabaseError` within a few seconds, saying what to
        check, rather than the pool retrying in the background meanwhile.
        """
        if not self._opened:
            self._opened = True
            try:
                await self._check_reachable()
                await self.pool.open()
            except BaseException:
                self._opened = False
                raise

    async def _check_reachable(self) -> None:
        try:
            conn = await AsyncConnection.connect(self.database_url, connect_timeout=CONNECT_TIMEOUT)
        except psycopg.OperationalError as exc:
            raise unreachable(self.database_url, exc) from None
        await conn.close()

    async def close(self) -> None:
        """Close the connection pool."""
        if self._opened:
            self._opened = False
            await self.pool.close()

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """Borrow an autocommit connection from the pool."""
        await self.open()
        async with self.pool.connection() as conn:
            yield conn

    # -- registry ---------------------------------------------------------------------

    @overload
    def task(
        self,
        args_type: type[T],
        *,
        kind: str | None = None,
        queue: str | None = None,
        deadline: float | None = None,
        max_attempts: int | None = None,
        completion: Literal["worker", "caller"] = "worker",
    ) -> TaskDecorator[T]: ...
    @overload
    def task(
        self,
        args_type: str,
        *,
        kind: str | None = None,
        queue: str | None = None,
        deadline: float | None = None,
        max_attempts: int | None = None,
        completion: Literal["worker", "caller"] = "worker",
    ) -> TaskDecorator[Any]: ...
    def task(
        self,
        args_type: type[Any] | str,
        *,
        kind: str | None = None,
        queue: str | None = None,
        deadline: float | None = None,
        max_attempts: int | None = None,
        completion: Literal["worker", "caller"] = "worker",
    ) -> TaskDecorator[Any]:
        """Register the decorated function as the handler of ``args_type``'s kind.

        *queue* is where jobs of the kind go by default (else ``"default"``); *deadline*
        bounds one attempt in seconds; *max_attempts* is the kind's default retry
        budget. An args type that declares its defaults (``@wai.kind``) gives them to
        the task, and an option here that differs raises :class:`wai.ValidationError`;
        one that declares nothing gets these options declared onto it, so that every
        client of the process inserts it alike.

        *completion* ``"caller"`` (SPEC §9): the handler opens its own transaction, writes
        its rows and calls ``await job.complete_in(tx)`` (``job.complete_in_sync(tx)``
        in a ``def`` handler), so the completion commits with those rows or not at all;
        the worker then writes no outcome of its own for a completed attempt. Such a
        kind takes no ``on_completed_enqueue`` (:class:`wai.ValidationError`): the
        handler inserts its follow-ups in its transaction. See docs/handlers.md.
        """

        def register(fn: Callable[[Job[Any]], R]) -> Callable[[Job[Any]], R]:
            self.registry.add_task(
                args_type,
                fn,
                kind=kind,
                queue=queue,
                deadline=deadline,
                max_attempts=max_attempts,
                completion=completion,
            )
            return fn

        return register

    def _build(self, request: EnqueueRequest) -> NewJob:
        """Validate one insert request against this client's registry."""
        return build_one(self.registry, request)

    def _build_many(self, items: Iterable[Any]) -> list[NewJob]:
        """Validate many inserts; items are args or :class:`wai.EnqueueRequest`."""
        return build_many(self.registry, items)

    # -- hooks and follow-up specs ----------------------------------------------------
    # Each works as a call, ``client.on_completed_enqueue(Signup, fn)``, and as a
    # decorator, ``@client.on_completed_enqueue(Signup)``. Specs for one (kind, outcome)
    # all fire, in registration order, one follow-up each. ``name=`` sets the spec's
    # lineage name (default: the closure's qualified name).

    @overload
    def on_event(self, kind: KindOrType, fn: None = None) -> Callable[[F], F]: ...
    @overload
    def on_event(self, kind: KindOrType, fn: F) -> F: ...
    def on_event(self, kind: KindOrType, fn: F | None = None) -> F | Callable[[F], F]:
        """Observe the lifecycle events of a kind (``"*"``: every kind): best-effort, after commit.

        ``fn(event)`` may be sync or async; it runs in the process that made the
        transition, never blocks a worker slot, and may be lost on a crash. Use it
        for metrics and logs, never for side effects that must happen.
        """
        return register_hook(self.registry, kind, fn)

    @overload
    def on_completed_enqueue(
        self, kind: type[T], fn: None = None, *, name: str | None = None
    ) -> Callable[[CompletedFn[T]], CompletedFn[T]]: ...
    @overload
    def on_completed_enqueue(
        self, kind: type[T], fn: CompletedFn[T], *, name: str | None = None
    ) -> CompletedFn[T]: ...
    @overload
    def on_completed_enqueue(
        self, kind: str, fn: None = None, *, name: str | None = None
    ) -> Callable[[CompletedFn[Any]], CompletedFn[Any]]: ...
    @overload
    def on_completed_enqueue(
        self, kind: str, fn: CompletedFn[Any], *, name: str | None = None
    ) -> CompletedFn[Any]: ...
    def on_completed_enqueue(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Enqueue ``fn(args, job)``'s result with every completion, in the same transaction."""
        return register_spec(self.registry, kind, "completed", fn, with_request=False, name=name)

    @overload
    def on_completed_enqueue_with(
        self, kind: type[T], fn: None = None, *, name: str | None = None
    ) -> Callable[[CompletedFn[T]], CompletedFn[T]]: ...
    @overload
    def on_completed_enqueue_with(
        self, kind: type[T], fn: CompletedFn[T], *, name: str | None = None
    ) -> CompletedFn[T]: ...
    @overload
    def on_completed_enqueue_with(
        self, kind: str, fn: None = None, *, name: str | None = None
    ) -> Callable[[CompletedFn[Any]], CompletedFn[Any]]: ...
    @overload
    def on_completed_enqueue_with(
        self, kind: str, fn: CompletedFn[Any], *, name: str | None = None
    ) -> CompletedFn[Any]: ...
    def on_completed_enqueue_with(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Like :meth:`on_completed_enqueue`; ``fn`` returns a :class:`wai.EnqueueRequest`."""
        return register_spec(self.registry, kind, "completed", fn, with_request=True, name=name)

    @overload
    def on_retried_enqueue(
        self, kind: type[T], fn: None = None, *, name: str | None = None
    ) -> Callable[[RetriedFn[T]], RetriedFn[T]]: ...
    @overload
    def on_retried_enqueue(
        self, kind: type[T], fn: RetriedFn[T], *, name: str | None = None
    ) -> RetriedFn[T]: ...
    @overload
    def on_retried_enqueue(
        self, kind: str, fn: None = None, *, name: str | None = None
    ) -> Callable[[RetriedFn[Any]], RetriedFn[Any]]: ...
    @overload
    def on_retried_enqueue(
        self, kind: str, fn: RetriedFn[Any], *, name: str | None = None
    ) -> RetriedFn[Any]: ...
    def on_retried_enqueue(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Enqueue ``fn(args, job, error, attempt, next_run_at)``'s result on each retry."""
        return register_spec(self.registry, kind, "retried", fn, with_request=False, name=name)

    @overload
    def on_retried_enqueue_with(
        self, kind: type[T], fn: None = None, *, name: str | None = None
    ) -> Callable[[RetriedFn[T]], RetriedFn[T]]: ...
    @overload
    def on_retried_enqueue_with(
        self, kind: type[T], fn: RetriedFn[T], *, name: str | None = None
    ) -> RetriedFn[T]: ...
    @overload
    def on_retried_enqueue_with(
        self, kind: str, fn: None = None, *, name: str | None = None
    ) -> Callable[[RetriedFn[Any]], RetriedFn[Any]]: ...
    @overload
    def on_retried_enqueue_with(
        self, kind: str, fn: RetriedFn[Any], *, name: str | None = None
    ) -> RetriedFn[Any]: ...
    def on_retried_enqueue_with(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Like :meth:`on_retried_enqueue`; ``fn`` returns a :class:`wai.EnqueueRequest`."""
        return register_spec(self.registry, kind, "retried", fn, with_request=True, name=name)

    @overload
    def on_exhausted_enqueue(
        self, kind: type[T], fn: None = None, *, name: str | None = None
    ) -> Callable[[ExhaustedFn[T]], ExhaustedFn[T]]: ...
    @overload
    def on_exhausted_enqueue(
        self, kind: type[T], fn: ExhaustedFn[T], *, name: str | None = None
    ) -> ExhaustedFn[T]: ...
    @overload
    def on_exhausted_enqueue(
        self, kind: str, fn: None = None, *, name: str | None = None
    ) -> Callable[[ExhaustedFn[Any]], ExhaustedFn[Any]]: ...
    @overload
    def on_exhausted_enqueue(
        self, kind: str, fn: ExhaustedFn[Any], *, name: str | None = None
    ) -> ExhaustedFn[Any]: ...
    def on_exhausted_enqueue(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Enqueue ``fn(args, job, error, attempt)``'s result when the job fails for good."""
        return register_spec(self.registry, kind, "exhausted", fn, with_request=False, name=name)

    @overload
    def on_exhausted_enqueue_with(
        self, kind: type[T], fn: None = None, *, name: str | None = None
    ) -> Callable[[ExhaustedFn[T]], ExhaustedFn[T]]: ...
    @overload
    def on_exhausted_enqueue_with(
        self, kind: type[T], fn: ExhaustedFn[T], *, name: str | None = None
    ) -> ExhaustedFn[T]: ...
    @overload
    def on_exhausted_enqueue_with(
        self, kind: str, fn: None = None, *, name: str | None = None
    ) -> Callable[[ExhaustedFn[Any]], ExhaustedFn[Any]]: ...
    @overload
    def on_exhausted_enqueue_with(
        self, kind: str, fn: ExhaustedFn[Any], *, name: str | None = None
    ) -> ExhaustedFn[Any]: ...
    def on_exhausted_enqueue_with(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Like :meth:`on_exhausted_enqueue`; ``fn`` returns a :class:`wai.EnqueueRequest`."""
        return register_spec(self.registry, kind, "exhausted", fn, with_request=True, name=name)

    @overload
    def on_cancelled_enqueue(
        self, kind: type[T], fn: None = None, *, name: str | None = None
    ) -> Callable[[CancelledFn[T]], CancelledFn[T]]: ...
    @overload
    def on_cancelled_enqueue(
        self, kind: type[T], fn: CancelledFn[T], *, name: str | None = None
    ) -> CancelledFn[T]: ...
    @overload
    def on_cancelled_enqueue(
        self, kind: str, fn: None = None, *, name: str | None = None
    ) -> Callable[[CancelledFn[Any]], CancelledFn[Any]]: ...
    @overload
    def on_cancelled_enqueue(
        self, kind: str, fn: CancelledFn[Any], *, name: str | None = None
    ) -> CancelledFn[Any]: ...
    def on_cancelled_enqueue(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Enqueue ``fn(args, job, reason)``'s result when the job is cancelled."""
        return register_spec(self.registry, kind, "cancelled", fn, with_request=False, name=name)

    @overload
    def on_cancelled_enqueue_with(
        self, kind: type[T], fn: None = None, *, name: str | None = None
    ) -> Callable[[CancelledFn[T]], CancelledFn[T]]: ...
    @overload
    def on_cancelled_enqueue_with(
        self, kind: type[T], fn: CancelledFn[T], *, name: str | None = None
    ) -> CancelledFn[T]: ...
    @overload
    def on_cancelled_enqueue_with(
        self, kind: str, fn: None = None, *, name: str | None = None
    ) -> Callable[[CancelledFn[Any]], CancelledFn[Any]]: ...
    @overload
    def on_cancelled_enqueue_with(
        self, kind: str, fn: CancelledFn[Any], *, name: str | None = None
    ) -> CancelledFn[Any]: ...
    def on_cancelled_enqueue_with(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Like :meth:`on_cancelled_enqueue`; ``fn`` returns a :class:`wai.EnqueueRequest`."""
        return register_spec(self.registry, kind, "cancelled", fn, with_request=True, name=name)

    @overload
    def on_waiting_for_callback_enqueue(
        self, kind: type[T], fn: None = None, *, name: str | None = None
    ) -> Callable[[CompletedFn[T]], CompletedFn[T]]: ...
    @overload
    def on_waiting_for_callback_enqueue(
        self, kind: type[T], fn: CompletedFn[T], *, name: str | None = None
    ) -> CompletedFn[T]: ...
    @overload
    def on_waiting_for_callback_enqueue(
        self, kind: str, fn: None = None, *, name: str | None = None
    ) -> Callable[[CompletedFn[Any]], CompletedFn[Any]]: ...
    @overload
    def on_waiting_for_callback_enqueue(
        self, kind: str, fn: CompletedFn[Any], *, name: str | None = None
    ) -> CompletedFn[Any]: ...
    def on_waiting_for_callback_enqueue(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Enqueue ``fn(args, job)``'s result when the job parks for an external callback."""
        return register_spec(
            self.registry, kind, "waiting_for_callback", fn, with_request=False, name=name
        )

    @overload
    def on_waiting_for_callback_enqueue_with(
        self, kind: type[T], fn: None = None, *, name: str | None = None
    ) -> Callable[[CompletedFn[T]], CompletedFn[T]]: ...
    @overload
    def on_waiting_for_callback_enqueue_with(
        self, kind: type[T], fn: CompletedFn[T], *, name: str | None = None
    ) -> CompletedFn[T]: ...
    @overload
    def on_waiting_for_callback_enqueue_with(
        self, kind: str, fn: None = None, *, name: str | None = None
    ) -> Callable[[CompletedFn[Any]], CompletedFn[Any]]: ...
    @overload
    def on_waiting_for_callback_enqueue_with(
        self, kind: str, fn: CompletedFn[Any], *, name: str | None = None
    ) -> CompletedFn[Any]: ...
    def on_waiting_for_callback_enqueue_with(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Like :meth:`on_waiting_for_callback_enqueue`, returning a :class:`wai.EnqueueRequest`."""
        return register_spec(
            self.registry, kind, "waiting_for_callback", fn, with_request=True, name=name
        )

    @overload
    def on_rescued_enqueue(
        self, kind: type[T], fn: None = None, *, name: str | None = None
    ) -> Callable[[RescuedFn[T]], RescuedFn[T]]: ...
    @overload
    def on_rescued_enqueue(
        self, kind: type[T], fn: RescuedFn[T], *, name: str | None = None
    ) -> RescuedFn[T]: ...
    @overload
    def on_rescued_enqueue(
        self, kind: str, fn: None = None, *, name: str | None = None
    ) -> Callable[[RescuedFn[Any]], RescuedFn[Any]]: ...
    @overload
    def on_rescued_enqueue(
        self, kind: str, fn: RescuedFn[Any], *, name: str | None = None
    ) -> RescuedFn[Any]: ...
    def on_rescued_enqueue(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Enqueue ``fn(args, job, reason)``'s result when maintenance rescues an attempt."""
        return register_spec(self.registry, kind, "rescued", fn, with_request=False, name=name)

    @overload
    def on_rescued_enqueue_with(
        self, kind: type[T], fn: None = None, *, name: str | None = None
    ) -> Callable[[RescuedFn[T]], RescuedFn[T]]: ...
    @overload
    def on_rescued_enqueue_with(
        self, kind: type[T], fn: RescuedFn[T], *, name: str | None = None
    ) -> RescuedFn[T]: ...
    @overload
    def on_rescued_enqueue_with(
        self, kind: str, fn: None = None, *, name: str | None = None
    ) -> Callable[[RescuedFn[Any]], RescuedFn[Any]]: ...
    @overload
    def on_rescued_enqueue_with(
        self, kind: str, fn: RescuedFn[Any], *, name: str | None = None
    ) -> RescuedFn[Any]: ...
    def on_rescued_enqueue_with(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Like :meth:`on_rescued_enqueue`; ``fn`` returns a :class:`wai.EnqueueRequest`."""
        return register_spec(self.registry, kind, "rescued", fn, with_request=True, name=name)

    # -- schema -----------------------------------------------------------------------

    async def migrate(self) -> list[int]:
        """Apply pending migrations; returns the versions applied. Safe to run concurrently."""
        async with self._connection() as conn:
            applied = await db.migrate_apply(conn, self.schema)
        return [m.version for m in applied]

    async def pending_migrations(self) -> list[int]:
        """Versions not yet applied to the database."""
        async with self._connection() as conn:
            done = await db.migrate_applied(conn, self.schema)
        return [m.version for m in migrations() if m.version not in done]

    async def check_schema(self) -> None:
        """Raise :class:`wai.SchemaNotMigrated` unless every migration is applied."""
        missing = await self.pending_migrations()
        if missing:
            raise SchemaNotMigrated(
                f"schema {self.schema!r} lacks migrations {missing}: "
                f"run {migrate_command(self.schema)} or `await client.migrate()`"
            )

    # -- health -----------------------------------------------------------------------

    async def health(self, timeout: float = 2.0) -> Health:
        """What a liveness or readiness probe needs to know (:class:`wai.Health`).

        Checks that the database answers and the schema has every migration, and, on an
        :class:`wai.AsyncClient` running workers, that its runtime and every loop of it
        run and its event loop keeps time. Never raises on a database outage: reports
        it, within ``timeout`` seconds even when the server hangs (a check still under
        way then is left to end on its own). The check borrows a pooled connection if
        one is free soon, else opens one of its own (so a pool busy with jobs is not an
        outage, and neither is a pooled connection broken by a server restart); a
        client not opened yet opens no pool for it.
        """
        limit = check_timeout(timeout)
        checked_at = datetime.now(UTC)
        began = time.monotonic()
        check = await bounded_async(lambda: self._check_database(limit), limit)
        if check is None:
            check = DatabaseCheck(
                answered=False,
                applied=None,
                error=f"no answer within {limit:g} s",
                latency=time.monotonic() - began,
            )
        return assess(
            check,
            schema=self.schema,
            migrations=[m.version for m in migrations()],
            runtime=self._runtime_health(),
            checked_at=checked_at,
        )

    def _runtime_health(self) -> RuntimeHealth | None:
        """The worker runtime as health() reports it; None: this client runs none."""
        return None

    async def _check_database(self, timeout: float) -> DatabaseCheck:
        began = time.monotonic()
        if self._opened:
            try:
                # A quarter of the time for a free pooled connection; then one of its own.
                async with self.pool.connection(timeout=timeout / 4) as conn:
                    return await _read_ledger(conn, self.schema, began)
            except psycopg.OperationalError:
                pass  # every connection busy, or this one broken: a fresh connection decides
        left = timeout - (time.monotonic() - began)
        try:
            conn = await AsyncConnection.connect(
                self.database_url, autocommit=True, connect_timeout=max(2, round(left))
            )
            async with conn:
                return await _read_ledger(conn, self.schema, began)
        except (psycopg.OperationalError, OSError) as exc:
            return DatabaseCheck(
                answered=False,
                applied=None,
                error=first_line(exc),
                latency=time.monotonic() - began,
            )

    # -- producer ---------------------------------------------------------------------

    async def insert(
        self,
        args: Any,
        *,
        kind: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        run_at: datetime | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        unique: UniqueOpts | None = None,
        ordering_key: str | None = None,
    ) -> JobRow:
        """Insert one job and return its committed row.

        ``queue``, ``priority`` and ``max_attempts`` default to what the args type
        declares (``@wai.kind``), else to the kind's registered task, else to
        ``"default"``, 2 and 25; ``run_at`` makes the job ``scheduled`` until then.
        Jobs of one queue that share an ``ordering_key`` run one at a time, in insert
        order, across every worker (``docs/flow-control.md``).
        """
        job = self._build(
            EnqueueRequest(
                args,
                kind=kind,
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                run_at=run_at,
                tags=tags,
                metadata=metadata,
                unique=unique,
                ordering_key=ordering_key,
            )
        )
        await self.open()
        return await self._insert_built(job)

    async def _insert_built(self, job: NewJob) -> JobRow:
        """Insert one validated job on a pooled connection, as one statement and commit."""
        # getconn/putconn rather than pool.connection(): an autocommit statement needs
        # none of its commit-or-rollback on exit, and a single insert is short enough for
        # that context's cost to show (putconn still rolls back a connection left in a
        # transaction).
        conn = await self.pool.getconn()
        try:
            return await inserts_db.insert_one(conn, self.schema, job, own=True)
        finally:
            await self.pool.putconn(conn)

    async def insert_many(self, items: Iterable[Any]) -> list[JobRow]:
        """Insert many jobs in one statement and one transaction; rows follow input order."""
        jobs = self._build_many(items)
        await self.open()
        async with self.pool.connection() as conn:
            if all(job.unique_key is None for job in jobs):
                # one statement, atomic on its own: no BEGIN and COMMIT round trips
                return await inserts_db.insert_batch(conn, self.schema, jobs)
            # a held key is looked up, and a conflict raised, after the insert: undo it then
            async with conn.transaction():
                return await inserts_db.insert_batch(conn, self.schema, jobs)

    async def copy_many(self, items: Iterable[Any]) -> int:
        """Bulk-load jobs with ``COPY``; returns how many were written.

        The items are those of :meth:`insert_many` and are validated the same way,
        all of them before anything is written; the jobs and the wakeup of their
        queues commit together. About 1.4x the throughput of ``insert_many`` for
        large batches, for what it gives up: no rows come back (no ids), and a job
        with ``unique=`` raises :class:`wai.ValidationError` (nothing is written).
        """
        jobs = self._build_many(items)
        await self.open()
        async with self.pool.connection() as conn, conn.transaction():
            return await inserts_db.copy_batch(conn, self.schema, jobs)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncTransaction]:
        """A transaction for business writes and job inserts that commit together."""
        async with self._connection() as conn:
            async with conn.transaction():
                tx = AsyncTransaction(self, conn)
                yield tx
            # Only once committed: a transaction that rolled back fires no hook.
            for fn in tx.after_commit:
                fn()

    # -- admin ------------------------------------------------------------------------

    async def get_job(self, job_id: int) -> JobRow:
        """The job with ``job_id``.

        Raises :class:`wai.JobNotFound`, whose message says when the job is in the
        dead-letter queue.
        """
        job_id = check_job_id(job_id)
        async with self._connection() as conn:
            with translate_errors(self.schema):
                row = await db.job_get(conn, self.schema, job_id)
                dead = await dlq_db.dlq_get(conn, self.schema, job_id) if row is None else None
        if dead is not None:
            raise JobNotFound(
                f"job {job_id} is in the dead-letter queue: see get_dlq_entry({job_id})"
            )
        if row is None:
            raise JobNotFound(f"no job with id {job_id}")
        return row

    async def lineage(self, job_id: int, *, limit: int = 500) -> Lineage:
        """Job ``job_id`` with its follow-up chain both ways: a :class:`wai.Lineage`.

        Up: the jobs whose outcomes enqueued it, nearest first, to the first job of
        the chain (or the first one retention has not deleted). Down: the follow-ups
        its outcomes enqueued and theirs, breadth first, at most ``limit`` (1 to
        10,000; ``truncated`` says when there were more). With them, the outbox rows
        of the job and its follow-ups: follow-ups still owed, and why they are late.
        Raises :class:`wai.JobNotFound` like :meth:`get_job`.
        """
        job_id = check_job_id(job_id)
        limit = check_int("limit", limit, 1, 10_000)
        job = await self.get_job(job_id)
        async with self._connection() as conn:
            with translate_errors(self.schema):
                ancestors, followups, owed = await db.job_lineage(
                    conn, self.schema, job_id, up=_LINEAGE_UP, down=limit + 1
                )
        return assemble(job, ancestors, followups, owed, limit=limit)

    async def list_jobs(
        self,
        *,
        state: JobState | str | None = None,
        kind: str | None = None,
        queue: str | None = None,
        tag: str | None = None,
        trigger_job_id: int | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        search: str | None = None,
        limit: int = 100,
        before_id: int | None = None,
        after_id: int | None = None,
    ) -> list[JobRow]:
        """Jobs newest first (by id); pass the last id as ``before_id`` for the next page.

        ``before_id`` and ``after_id`` keep the jobs whose id is below the first and
        above the second.

        Every filter given must hold. ``created_after`` and ``created_before``
        (timezone-aware datetimes; a naive one raises :class:`wai.ValidationError`)
        keep the jobs created at or after the first and strictly before the second,
        so consecutive ranges neither overlap nor leave a gap. ``search`` matches a
        job whose kind holds the text, ASCII letters in any case, every character
        literally (``%`` and ``_`` are no wildcards); a decimal integer (``"123"``,
        or ``"#123"``) also matches the job with that id. Text that cannot match
        (empty, longer than 200 characters, a NUL byte) raises
        :class:`wai.ValidationError`.

        Time bounds. No index serves ``created_at`` (every insert and update would
        pay for one): each bound becomes a bound on ids, found by a binary search
        of the primary key in the same statement (about 20 probes for a million
        jobs), and only the ids in range are read. Ids follow creation times but
        for one case: ``created_at`` is when the inserting transaction began (on
        the server's clock), while the id is taken when it inserts. So each bound
        is widened by 5 seconds before the search, and every job whose transaction
        inserted it within 5 seconds of beginning is listed exactly. A transaction
        that stayed open longer across a bound (began more than 5 seconds before
        it, inserted a job after it) can hide jobs at that bound: its own jobs at
        ``created_before``, and at ``created_after`` the jobs inserted between the
        bound and its insert. A job outside the bounds is never listed.

        Cost. A filter on a state other than available, running or completed walks
        an index, and so does ``trigger_job_id``. The others (``kind``,
        ``queue``, ``tag``, ``search``) are checked job by job, newest first,
        until ``limit`` jobs match: one that matches few jobs reads every job in
        the id and time range to say so (a million jobs: a few hundred
        milliseconds). Bound such a listing with a time range or ``after_id``.
        """
        if state is not None:
            try:
                state = JobState(state)
            except ValueError:
                raise ValidationError(
                    f"unknown state {state!r}: one of {', '.join(s.value for s in JobState)}"
                ) from None
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ValidationError(f"limit must be 1..10000, got {limit!r}")
        for name, value in (("kind", kind), ("queue", queue), ("tag", tag)):
            if value is not None:
                check_text(value, name)
        before_id = check_filter_id(before_id, "before_id")
        after_id = check_filter_id(after_id, "after_id")
        trigger_job_id = check_filter_id(trigger_job_id, "trigger_job_id")
        created_after, created_before = check_time_range(created_after, created_before)
        found = parse_search(search)
        async with self._connection() as conn:
            with translate_errors(self.schema):
                return await db.job_list(
                    conn,
                    self.schema,
                    state=state.value if state is not None else None,
                    kind=kind,
                    queue=queue,
                    tag=tag,
                    trigger_job_id=trigger_job_id,
                    created_after=created_after,
                    created_before=created_before,
                    search=found,
                    before_id=before_id,
                    after_id=after_id,
                    limit=limit,
                )

    async def cancel(self, job_id: int) -> JobRow:
        """Cancel a job that has not finished; returns its ``cancelled`` row.

        Any non-terminal job (scheduled, available, running, retryable,
        waiting_external) becomes ``cancelled`` with ``finalized_at`` set and an
        error entry ``"cancelled by operator"``. When it was running (or parked on
        a callback), its worker is notified in the same transaction and the
        attempt's ``job.is_cancelled()`` turns true; whatever the attempt returns
        afterwards is fenced off. ``run_lease`` goes up by one, so each cancel
        has its own outbox row and follow-ups. Raises :class:`wai.JobNotFound`, or
        :class:`wai.InvalidStateError` for a completed, failed or cancelled job.
        """
        job_id = check_job_id(job_id)
        async with self._connection() as conn:
            with translate_errors(self.schema):
                return await transitions.cancel_job(conn, self.schema, job_id)

    async def retry(self, job_id: int) -> JobRow:
        """Run a failed, cancelled or waiting_external job again, now.

        The job becomes ``available`` with ``run_at`` now, and its finalization,
        heartbeat, deadline and callback cleared; its error history is kept. Its
        ``attempt`` count is kept, so ``max_attempts`` still bounds the job; one
        with no attempt left gets exactly one more (``max_attempts = attempt +
        1``). ``run_lease`` goes up by one, so the follow-ups of a later cancel
        are its own. Its queue's workers are woken. Raises
        :class:`wai.JobNotFound`, or :class:`wai.InvalidStateError` for a job in
        any other state.
        """
        job_id = check_job_id(job_id)
        async with self._connection() as conn:
            with translate_errors(self.schema):
                return await transitions.retry_job(conn, self.schema, job_id)

    async def pause_queue(self, name: str) -> None:
        """Stop workers from claiming jobs of queue ``name`` until it is resumed.

        Inserts into a paused queue still succeed, and attempts already running
        finish. Pausing a paused queue changes nothing.
        """
        validate_queue(name)
        async with self._connection() as conn:
            with translate_errors(self.schema):
                await db.queue_pause(conn, self.schema, name)

    async def set_queue_limits(
        self,
        name: str,
        *,
        rate_limit: RateLimit | None = None,
        global_concurrency: int | None = None,
    ) -> None:
        """Replace the flow control of queue ``name``, for every process at once.

        *rate_limit* caps how many of its jobs start per period across all workers
        (a :class:`wai.RateLimit`), *global_concurrency* how many of its attempts run
        at once across all workers; None lifts that limit. Workers listening for
        notifications apply the change before their next claim (without LISTEN, within
        30 s; a limit newly set is never broken meanwhile: their plain claims take
        nothing from a limited queue). A worker that starts with a
        :class:`wai.QueueConfig` giving a limit stores its own value again. See
        ``docs/flow-control.md``.
        """
        validate_queue(name)
        if rate_limit is not None and not isinstance(rate_limit, RateLimit):
            raise ValidationError(f"rate_limit must be a wai.RateLimit or None, got {rate_limit!r}")
        if global_concurrency is not None:
            check_global_concurrency(global_concurrency)
        async with self._connection() as conn:
            with translate_errors(self.schema):
                await db.queue_set_limits(
                    conn,
                    self.schema,
                    name,
                    rate_limit=rate_limit,
                    global_concurrency=global_concurrency,
                )

    async def set_kind_rate_limit(
        self, queue: str, kind: KindOrType, rate_limit: RateLimit | None
    ) -> None:
        """Set (or, with None, lift) the rate limit of one kind within queue ``queue``.

        Jobs of ``kind`` in that queue then start at most as fast as ``rate_limit``
        allows across all workers, on top of the queue's own limits; jobs of other
        kinds are not held back by them. *kind* is a kind name or an args type. A
        worker that starts with a :class:`wai.QueueConfig` whose ``kind_rate_limits``
        names the kind stores its own value again. See ``docs/flow-control.md``.
        """
        validate_queue(queue)
        name = kind_of_type(kind)
        if rate_limit is not None and not isinstance(rate_limit, RateLimit):
            raise ValidationError(f"rate_limit must be a wai.RateLimit or None, got {rate_limit!r}")
        async with self._connection() as conn:
            with translate_errors(self.schema):
                await db.kind_limit_set(conn, self.schema, queue, name, rate_limit)

    async def resume_queue(self, name: str) -> None:
        """Let workers claim from queue ``name`` again; idle workers are woken at once."""
        validate_queue(name)
        async with self._connection() as conn:
            with translate_errors(self.schema):
                await db.queue_resume(conn, self.schema, name)

    async def drain_queue(self, name: str) -> int:
        """Cancel every job of queue ``name`` that waits to run; returns how many.

        Available, scheduled, retryable and waiting_external jobs become
        ``cancelled`` (error ``"cancelled by operator: queue drained"``); running
        attempts are left to finish. Combine with :meth:`pause_queue` to empty a
        queue that producers keep filling.
        """
        validate_queue(name)
        async with self._connection() as conn:
            with translate_errors(self.schema):
                return await transitions.drain_queue(conn, self.schema, name)

    async def queue_stats(self) -> list[QueueStats]:
        """One :class:`wai.QueueStats` per queue that has jobs or was paused, by name.

        Counts of unfinished jobs are exact; on a jobs table of more than 50,000 rows,
        those of finished jobs are estimates (see :class:`wai.QueueStats`).
        """
        async with self._connection() as conn:
            with translate_errors(self.schema):
                return await db.queue_stats(conn, self.schema)

    async def queue_depth_history(
        self, *, minutes: int = 60, queue: str | None = None
    ) -> list[QueueDepth]:
        """The depth samples of the last ``minutes`` (1 to 1440), oldest first.

        The maintenance leader records one :class:`wai.QueueDepth` per queue every
        ``depth_interval`` seconds (15 by default) and keeps a day of them; ``queue``
        keeps one queue's. Empty when no process has run maintenance in that time.
        """
        minutes = check_int("minutes", minutes, 1, 1440)
        if queue is not None:
            validate_queue(queue)
        async with self._connection() as conn:
            with translate_errors(self.schema):
                return await db.queue_depth_history(conn, self.schema, minutes=minutes, queue=queue)

    async def throughput(
        self, *, minutes: int = 60, queue: str | None = None, kind: str | None = None
    ) -> list[ThroughputMinute]:
        """What workers did per minute over the last ``minutes`` (1 to 1440), oldest first.

        One :class:`wai.ThroughputMinute` for every minute of the window, the current
        one included (counts 0 where nothing happened), summed over every queue and kind
        unless ``queue`` or ``kind`` is given. Each worker process counts its committed
        outcomes (and its maintenance's rescues) in memory and adds them to the database
        every ``throughput_interval`` seconds (5 by default), so the current minute fills
        in as it goes, and a process that crashes loses the counts of its last seconds.
        The counts are kept a day. Operator actions (cancel, retry, drain) and callback
        resolutions made by a process that runs no worker are not counted.
        """
        minutes = check_int("minutes", minutes, 1, 1440)
        if queue is not None:
            validate_queue(queue)
        if kind is not None:
            check_text(kind, "kind")
        async with self._connection() as conn:
            with translate_errors(self.schema):
                return await db.throughput_history(
                    conn, self.schema, minutes=minutes, queue=queue, kind=kind
                )

    async def list_runtime_instances(self) -> list[RuntimeInstance]:
        """The live worker and maintenance processes, as they last recorded themselves.

        One :class:`wai.RuntimeInstance` per process, oldest first. Each process
        refreshes its row every ``record_interval`` seconds and deletes it when it
        shuts down gracefully; rows of crashed processes linger until the
        maintenance leader collects them (3 x their record interval, at least 30 s).
        """
        async with self._connection() as conn:
            with translate_errors(self.schema):
                return await db.runtime_instance_list(conn, self.schema)

    # -- dead-letter queue (wai.dlq) --------------------------------------------------

    async def list_dlq(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        reason: str | None = None,
        limit: int = 100,
        before: str | None = None,
    ) -> list[DlqEntry]:
        """Dead-lettered jobs, newest first; pass the last entry's ``.cursor`` as ``before``."""
        return await self._dlq.list_dlq(
            queue=queue, kind=kind, tag=tag, reason=reason, limit=limit, before=before
        )

    async def get_dlq_entry(self, job_id: int) -> DlqEntry:
        """The dead-letter entry of job ``job_id``; raises :class:`wai.JobNotFound`."""
        return await self._dlq.get_dlq_entry(job_id)

    async def dlq_depth(self, queue: str | None = None) -> int:
        """How many jobs are dead-lettered, in ``queue`` or in all queues."""
        return await self._dlq.dlq_depth(queue)

    async def dlq_depths(self) -> dict[str, int]:
        """Dead-lettered jobs per queue (queues without any are left out)."""
        return await self._dlq.dlq_depths()

    async def retry_from_dlq(
        self,
        job_id: int,
        *,
        queue: str | None = None,
        priority: int | None = None,
        run_at: datetime | None = None,
    ) -> JobRow:
        """Put a dead-lettered job back to run; returns its row.

        The job keeps its id, errors, metadata, run lease and lineage, and gets a
        fresh retry budget (``attempt`` 0). It becomes ``available`` now, or
        ``scheduled`` for a future ``run_at``; ``queue`` and ``priority`` move or
        re-prioritise it. Raises :class:`wai.JobNotFound` when it is not
        dead-lettered, and :class:`wai.UniqueConflict` (the entry stays) when a
        live job holds its unique key.
        """
        return await self._dlq.retry_from_dlq(job_id, queue=queue, priority=priority, run_at=run_at)

    async def bulk_retry_from_dlq(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        reason: str | None = None,
        all: bool = False,
        to_queue: str | None = None,
        priority: int | None = None,
        run_at: datetime | None = None,
        batch_size: int = 1000,
        on_progress: Progress | None = None,
    ) -> int:
        """Retry every dead-lettered job matching the filters, oldest first; returns how many.

        Like :meth:`retry_from_dlq` for each entry (``to_queue``, ``priority`` and
        ``run_at`` apply to all). Entries whose unique key a live job holds stay and
        are not counted; so do entries that arrive after the call started (a retried
        job that fails again is not retried twice).
        """
        return await self._dlq.bulk_retry_from_dlq(
            queue=queue,
            kind=kind,
            tag=tag,
            reason=reason,
            all=all,
            to_queue=to_queue,
            priority=priority,
            run_at=run_at,
            batch_size=batch_size,
            on_progress=on_progress,
        )

    async def move_to_dlq(self, job_id: int, reason: str = "manual") -> DlqEntry:
        """Move a ``failed`` job to the dead-letter queue, whatever its queue's policy.

        Raises :class:`wai.JobNotFound`, or :class:`wai.InvalidStateError` when
        the job is not ``failed``.
        """
        return await self._dlq.move_to_dlq(job_id, reason)

    async def bulk_move_to_dlq(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        all: bool = False,
        reason: str = "manual",
        batch_size: int = 1000,
        on_progress: Progress | None = None,
    ) -> int:
        """Move every ``failed`` job matching the filters to the dead-letter queue."""
        return await self._dlq.bulk_move_to_dlq(
            queue=queue,
            kind=kind,
            tag=tag,
            all=all,
            reason=reason,
            batch_size=batch_size,
            on_progress=on_progress,
        )

    async def purge_dlq_entry(self, job_id: int) -> None:
        """Delete one dead-letter entry for good; raises :class:`wai.JobNotFound`."""
        await self._dlq.purge_dlq_entry(job_id)

    async def purge_dlq(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        reason: str | None = None,
        all: bool = False,
        batch_size: int = 1000,
        on_progress: Progress | None = None,
    ) -> int:
        """Delete every dead-letter entry matching the filters; returns how many.

        Without a filter it deletes nothing and raises :class:`wai.ValidationError`
        unless ``all=True``.
        """
        return await self._dlq.purge_dlq(
            queue=queue,
            kind=kind,
            tag=tag,
            reason=reason,
            all=all,
            batch_size=batch_size,
            on_progress=on_progress,
        )

    async def count_dlq(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        tag: str | None = None,
        reason: str | None = None,
    ) -> int:
        """How many dead-letter entries match the filters (what a bulk action would cover)."""
        return await self._dlq.count_dlq(queue=queue, kind=kind, tag=tag, reason=reason)

    # -- periodic schedules (wai.cron) ------------------------------------------------

    def periodic(
        self,
        name: str,
        expr: str,
        args: Any,
        *,
        timezone: str = "UTC",
        kind: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        missed_fire_policy: str = "coalesce",
    ) -> None:
        """Register a periodic schedule: enqueue ``args`` at every fire time of ``expr``.

        ``expr`` is a 5-field (``"*/5 * * * *"``) or 6-field (leading seconds)
        cron expression, or a macro such as ``"@daily"``, read in the IANA time
        zone ``timezone``. The job's queue, ``priority`` and ``max_attempts`` default
        to what the args type declares (``@wai.kind``); the queue and
        ``max_attempts`` else to the kind's registered task (when the schedule is
        stored), else ``"default"``, priority 2 and 25. ``missed_fire_policy``
        says what a schedule owes for fire times it missed (maintenance down,
        schedule paused): ``"coalesce"`` enqueues one job for the latest of them,
        ``"catch_up"`` one per fire time, in order.

        Registration validates everything at once (an invalid expression, time
        zone, args or option raises :class:`wai.ValidationError`); the schedule is
        stored by name when the client starts (or on :meth:`upsert_cron`).
        """
        self._cron.periodic(
            name,
            expr,
            args,
            timezone=timezone,
            kind=kind,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            tags=tags,
            metadata=metadata,
            missed_fire_policy=missed_fire_policy,
        )

    async def upsert_cron(self) -> list[str]:
        """Store the schedules registered with :meth:`periodic`; returns their names.

        New schedules start counting from now; existing ones get the registered
        expression, zone, args and options while their cursor and pause stay.
        ``start()`` calls this for you.
        """
        return await self._cron.upsert_cron()

    async def list_cron(self) -> list[Schedule]:
        """Every stored schedule, by name, with its next fire time."""
        return await self._cron.list_cron()

    async def get_cron(self, name: str) -> Schedule:
        """One stored schedule; raises :class:`wai.ScheduleNotFound`."""
        return await self._cron.get_cron(name)

    async def pause_cron(self, name: str) -> Schedule:
        """Stop a schedule from firing until :meth:`resume_cron`; redeploys keep it paused."""
        return await self._cron.pause_cron(name)

    async def resume_cron(self, name: str) -> Schedule:
        """Let a paused schedule fire again.

        The fire times it missed while paused are owed by its missed-fire
        policy: one job for ``coalesce``, one per fire time for ``catch_up``.
        """
        return await self._cron.resume_cron(name)

    async def trigger_cron(self, name: str) -> JobRow:
        """Enqueue one job of the schedule now, even while paused; its cursor stays.

        The job's ``metadata["wai.cron"]`` has ``"manual": true``.
        """
        return await self._cron.trigger_cron(name)

    async def delete_cron(self, name: str) -> None:
        """Delete a stored schedule. A process that registers it stores it again on start."""
        await self._cron.delete_cron(name)

    # -- follow-up outbox (wai.outbox) ------------------------------------------------

    async def outbox_list(
        self,
        *,
        state: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        after_id: int | None = None,
    ) -> list[OutboxEntry]:
        """Outbox rows, oldest first, each with its attempts and last error.

        ``state`` is None (every row), ``"pending"`` or ``"failed"``; ``kind``
        keeps the rows of one trigger kind; ``after_id`` continues after the
        last entry of a full page.
        """
        return await self._outbox.outbox_list(
            state=state, kind=kind, limit=limit, after_id=after_id
        )

    async def outbox_stats(self) -> OutboxStats:
        """How many outbox rows are pending and how many failed (see :class:`wai.OutboxStats`)."""
        return await self._outbox.outbox_stats()

    async def outbox_retry(self, outbox_id: int) -> OutboxEntry:
        """Make outbox row ``outbox_id`` due now, with a fresh budget of attempts.

        A failed row becomes pending again; ``attempts`` restarts at 0 and
        ``last_error`` stays until the next attempt replaces it (or the row is
        dispatched and deleted). The next sweep of a process holding specs for its
        kind and outcome dispatches it. Raises :class:`wai.OutboxRowNotFound` when
        no row has that id (it may have been dispatched meanwhile).
        """
        return await self._outbox.outbox_retry(outbox_id)

    async def outbox_discard(self, outbox_id: int) -> bool:
        """Delete outbox row ``outbox_id``: its follow-ups will never be inserted.

        Returns whether the row existed. Waits for a sweeper dispatching the row
        right now; if that dispatch succeeded, there is nothing left to discard.
        """
        return await self._outbox.outbox_discard(outbox_id)

    # -- external callbacks (wai.callbacks) -------------------------------------------

    def _resolved(self, resolved: Resolved) -> None:
        """After a resolution commits: its outcome is counted (:mod:`wai._metrics`); the
        async client with a runtime fires hooks here too."""
        if resolved.outcome is not None:
            counter = METRICS.outcomes.get(resolved.outcome.event)
            if counter is not None:
                counter.add((resolved.row.queue, resolved.row.kind))

    async def complete_external(self, callback_id: Any, payload: Any = None) -> JobRow:
        """Complete the job waiting on ``callback_id``; returns its ``completed`` row.

        Applies to a parked (``waiting_external``) job, and to a ``running`` one
        whose handler registered the callback but has not parked yet (the late
        park is then fenced). ``payload`` (JSON) is kept as ``row.callback_result``.
        """
        return await self._callbacks.complete_external(callback_id, payload)

    async def complete_external_in_tx(
        self, tx: AsyncTransaction, callback_id: Any, payload: Any = None
    ) -> JobRow:
        """:meth:`complete_external` inside ``tx`` (from ``client.transaction()``)."""
        return await self._callbacks.complete_external_in_tx(tx, callback_id, payload)

    async def fail_external(self, callback_id: Any, error: str) -> JobRow:
        """Fail the job waiting on ``callback_id`` for good, whatever attempts remain.

        ``error`` is recorded as a terminal error entry; ``on_exhausted_enqueue``
        specs fire. Returns the ``failed`` row.
        """
        return await self._callbacks.fail_external(callback_id, error)

    async def fail_external_in_tx(
        self, tx: AsyncTransaction, callback_id: Any, error: str
    ) -> JobRow:
        """:meth:`fail_external` inside ``tx`` (from ``client.transaction()``)."""
        return await self._callbacks.fail_external_in_tx(tx, callback_id, error)

    async def retry_external(self, callback_id: Any) -> JobRow:
        """Run the parked job of ``callback_id`` again now, as its next attempt.

        Applies to ``waiting_external`` only: the job becomes ``available`` with
        ``run_at`` now, its queue is woken, and ``on_retried_enqueue`` specs fire.
        The attempt count is kept, so ``max_attempts`` bounds how often an outside
        sender can retry: when the parked attempt was the last one, the job is
        exhausted instead (``failed``, ``on_exhausted_enqueue``). Returns the row.
        """
        return await self._callbacks.retry_external(callback_id)

    async def retry_external_in_tx(self, tx: AsyncTransaction, callback_id: Any) -> JobRow:
        """:meth:`retry_external` inside ``tx`` (from ``client.transaction()``)."""
        return await self._callbacks.retry_external_in_tx(tx, callback_id)

    async def resume_external(self, callback_id: Any, payload: Any = None) -> JobRow:
        """Hand ``payload`` to the handler waiting in ``job.wait_for_callback``.

        The job goes back to ``running`` (same attempt and run lease) and the
        handler's ``wait_for_callback`` returns ``payload``. No event and no
        follow-up: the handler produces the attempt's outcome. A job parked by
        returning ``WaitForCallback`` has no handler left to take the payload: the
        call raises :class:`wai.InvalidStateError` and changes nothing (use
        ``complete_external``, ``fail_external`` or ``retry_external`` there).
        """
        return await self._callbacks.resume_external(callback_id, payload)

    async def resume_external_in_tx(
        self, tx: AsyncTransaction, callback_id: Any, payload: Any = None
    ) -> JobRow:
        """:meth:`resume_external` inside ``tx`` (from ``client.transaction()``)."""
        return await self._callbacks.resume_external_in_tx(tx, callback_id, payload)

    async def heartbeat_callback(self, callback_id: Any, timeout: float = 3600.0) -> JobRow:
        """Push the timeout of ``callback_id`` out to ``timeout`` seconds from now.

        For an external system that is still working; the job stays parked.
        """
        return await self._callbacks.heartbeat_callback(callback_id, timeout)

    async def heartbeat_callback_in_tx(
        self, tx: AsyncTransaction, callback_id: Any, timeout: float = 3600.0
    ) -> JobRow:
        """:meth:`heartbeat_callback` inside ``tx`` (from ``client.transaction()``)."""
        return await self._callbacks.heartbeat_callback_in_tx(tx, callback_id, timeout)

    async def resolve_callback(
        self, callback_id: Any, payload: Any, default_action: str = "ignore"
    ) -> CallbackResolution:
        """Decide with the callback's CEL expressions what ``payload`` means, and apply it.

        ``filter`` false ignores the payload (nothing changes); ``on_fail`` true
        fails the job; ``on_complete`` true completes it with the payload shaped by
        ``transform``; when neither matches, ``default_action`` (``"complete"``,
        ``"fail"`` or ``"ignore"``) decides. Needs ``wai[cel]`` when expressions
        were registered.
        """
        return await self._callbacks.resolve_callback(callback_id, payload, default_action)

    async def resolve_callback_in_tx(
        self, tx: AsyncTransaction, callback_id: Any, payload: Any, default_action: str = "ignore"
    ) -> CallbackResolution:
        """:meth:`resolve_callback` inside ``tx`` (from ``client.transaction()``)."""
        return await self._callbacks.resolve_callback_in_tx(
            tx, callback_id, payload, default_action
        )

    async def list_waiting(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[WaitingJob]:
        """Jobs parked in ``waiting_external`` on a callback, soonest timeout first.

        Each :class:`wai.WaitingJob` carries the job's row, its callback id and
        timeout, whether the timeout passed (``overdue``: maintenance closes the
        attempt on its next rescue pass) and whether a handler waits in place.
        ``queue`` and ``kind`` narrow the listing; pass the last job's ``.cursor``
        as ``after`` for the next page. Each page is one walk of the index of
        waiting jobs from the cursor on, however many jobs there are.
        """
        return await self._callbacks.list_waiting(queue=queue, kind=kind, limit=limit, after=after)

    async def list_callback_timeouts(
        self, *, queue: str | None = None, kind: str | None = None, limit: int = 50
    ) -> list[CallbackTimeout]:
        """Recent callback timeouts, newest first: :class:`wai.CallbackTimeout` entries.

        A callback timeout is recorded by maintenance when it closes the attempt: an
        error entry ``{"rescued": "callback_timeout"}``, the job becoming
        ``retryable`` (or ``failed`` on its last attempt, or dead-lettered with
        reason ``callback_timeout``). Listed are the jobs whose last attempt ended
        so and that have not run again since, found among the 1,000 newest
        retryable jobs, the 1,000 newest failed jobs and the 1,000 newest
        dead-letter entries (no index finds a timeout; this bounds the reading): a
        timeout of an older job, once that many newer ones failed, is not listed.
        ``queue`` and ``kind`` narrow the listing; ``limit`` is 1 to 1000.
        """
        return await self._callbacks.list_callback_timeouts(queue=queue, kind=kind, limit=limit)
