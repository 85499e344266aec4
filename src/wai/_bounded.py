"""A call that may not make its caller wait past a time bound, even if it hangs itself.

``client.health()`` must answer within its timeout when the database hangs. Timing out
a psycopg call is not enough for that: an async query cancelled on a silent server waits
seconds more for the cancellation to reach it, and a sync one cannot be interrupted at
all. So the call runs on its own (:func:`bounded_async`: a task; :func:`bounded_sync`: a
daemon thread) and the caller stops waiting at the bound: the call is left to finish or
fail on its own (a task is cancelled), and its result is dropped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["bounded_async", "bounded_sync"]

T = TypeVar("T")

#: Tasks left to finish after their caller stopped waiting (a reference keeps them alive).
_LEFT: set[asyncio.Task[Any]] = set()


def _forget(task: asyncio.Task[Any]) -> None:
    _LEFT.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: nobody is told about it


async def bounded_async(call: Callable[[], Coroutine[Any, Any, T]], timeout: float) -> T | None:
    """``await call()``, or None once ``timeout`` seconds pass first (the task is cancelled,
    not waited for). Its exception propagates; so does a cancellation of the caller."""
    task = asyncio.ensure_future(call())
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        _LEFT.add(task)
        task.add_done_callback(_forget)
        raise
    if done:
        return task.result()
    task.cancel()
    _LEFT.add(task)
    task.add_done_callback(_forget)
    return None


def bounded_sync(call: Callable[[], T], timeout: float) -> T | None:
    """``call()`` in a daemon thread, or None once ``timeout`` seconds pass first (the thread
    runs on, its result dropped). Its exception propagates."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            result = call()
        except BaseException as exc:  # handed to the caller, who may have stopped waiting
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=run, name="wai-bounded", daemon=True).start()
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        return None
