"""Shared helpers for the worker integration tests: small timings, polling, raw SQL.

Tests never sleep a fixed time to wait for the worker: they poll the database
with :func:`wait_for` until a condition holds or a generous timeout passes.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, LiteralString, TypeVar

import psycopg

import wai
from wai.worker import Runtime

T = TypeVar("T")

#: Runtime timings small enough for tests (seconds). Rescue (tested on its own) runs
#: once when leadership is taken and then rarely: here it must never race with the
#: worker's own outcomes, nor rescue a live job whose heartbeat a loaded CI box delayed.
FAST: dict[str, Any] = {
    "poll_interval": 0.1,
    "heartbeat_interval": 0.2,
    "heartbeat_staleness": 0.6,
    "promote_interval": 0.05,
    "election_interval": 0.2,
    "rescue_interval": 60,
}

FLAVORS = ("async", "sync")


@dataclass
class Work:
    """The args of most worker tests: kind ``work``, queue ``q``."""

    n: int = 0


async def notes(conn: psycopg.AsyncConnection[Any], seconds: float = 0.3) -> list[str]:
    """The NOTIFY payloads that arrived on the listening ``conn`` within ``seconds``."""
    return [n.payload async for n in conn.notifies(timeout=seconds)]


async def wait_for(
    predicate: Callable[[], T | Awaitable[T | None] | None],
    timeout: float = 5.0,
    *,
    interval: float = 0.03,
    what: str | None = None,
) -> T:
    """Poll ``predicate`` (sync or async) until it returns a truthy value; return it.

    A predicate that returns ``X | None`` gives an ``X``: ``None`` is never returned.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result  # type: ignore[return-value]
        last = result
        if loop.time() >= deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what or predicate!r} (last: {last!r})"
            )
        await asyncio.sleep(interval)


async def wait_job(
    client: wai.AsyncClient,
    job_id: int,
    check: Callable[[wai.JobRow], bool] | str,
    timeout: float = 5.0,
) -> wai.JobRow:
    """Wait until the job's row satisfies ``check`` (a predicate or a state name)."""

    async def probe() -> wai.JobRow | None:
        row = await client.get_job(job_id)
        ok = row.state == check if isinstance(check, str) else check(row)
        return row if ok else None

    what = f"job {job_id} {'in state ' + check if isinstance(check, str) else 'to match'}"
    return await wait_for(probe, timeout, what=what)


async def fetch(
    client: wai.AsyncClient, query: LiteralString, params: Any = None
) -> list[tuple[Any, ...]]:
    """Run one statement on a pool connection (autocommit) and return its rows, if any."""
    async with client._connection() as conn:
        cur = await conn.execute(query, params)
        return await cur.fetchall() if cur.description else []


async def db_now(client: wai.AsyncClient) -> datetime:
    """The database clock (``clock_timestamp()``)."""
    rows = await fetch(client, "SELECT clock_timestamp()")
    return rows[0][0]


async def count(client: wai.AsyncClient, where: LiteralString = "true", params: Any = None) -> int:
    """``SELECT count(*) FROM wai.jobs WHERE <where>``."""
    rows = await fetch(client, "SELECT count(*) FROM wai.jobs WHERE " + where, params)
    return int(rows[0][0])


def register(
    client: wai.AsyncClient,
    flavor: str,
    fn: Callable[[wai.Job[Any]], Any],
    args_type: type[Any] | str = Work,
    **options: Any,
) -> None:
    """Register ``fn`` (a quick plain function) as an ``async def`` or a ``def`` handler."""
    options.setdefault("queue", "q")
    if flavor == "async":

        async def handler(job: wai.Job[Any]) -> Any:
            return fn(job)

        client.task(args_type, **options)(handler)
    else:
        assert flavor == "sync"

        def sync_handler(job: wai.Job[Any]) -> Any:
            return fn(job)

        client.task(args_type, **options)(sync_handler)


async def wait_gate(gate: threading.Event, timeout: float = 10.0) -> None:
    """Await a threading.Event from an async handler without blocking the loop."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not gate.is_set():
        if loop.time() >= deadline:
            raise TimeoutError("gate never opened")
        await asyncio.sleep(0.01)


@asynccontextmanager
async def serving(
    client: wai.AsyncClient,
    queues: Mapping[str, int | wai.QueueConfig] | None = None,
    *,
    shutdown_timeout: float = 5.0,
    **overrides: Any,
) -> AsyncIterator[wai.AsyncClient]:
    """Start the client's workers with :data:`FAST` timings; always shut them down."""
    settings = {**FAST, **overrides}
    await client.start({"q": 4} if queues is None else queues, **settings)
    try:
        yield client
    finally:
        await client.shutdown(timeout=shutdown_timeout)


def runtime_of(client: wai.AsyncClient) -> Runtime:
    """The client's running worker runtime (a private object the tests look into)."""
    runtime = client._runtime  # pyright: ignore[reportPrivateUsage]
    assert runtime is not None
    return runtime


async def attempts_settled(client: wai.AsyncClient) -> bool:
    """True once this client's runtime holds no live attempt (outcomes written or dropped)."""
    return not runtime_of(client).attempts


#: ``await admin("method", *args)``: an operator method run on either client.
Admin = Callable[..., Awaitable[Any]]


def admin_caller(flavor: str, aclient: wai.AsyncClient, sclient: wai.Client) -> Admin:
    """Run a client method by name on the async client, or on the sync one in a thread."""
    if flavor == "async":

        async def call_async(method: str, *args: Any, **kwargs: Any) -> Any:
            return await getattr(aclient, method)(*args, **kwargs)

        return call_async

    async def call_sync(method: str, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(sclient, method), *args, **kwargs)

    return call_sync
