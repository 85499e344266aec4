"""What a feature's operations get from the async client (source of the sync client).

Each feature package (:mod:`wai.dlq`, :mod:`wai.cron`, :mod:`wai.outbox`,
:mod:`wai.callbacks`) has an operations object built on a client core
(:class:`AsyncClientCore`), the client itself: its pooled connections, its schema
and its registry, and nothing else of the client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from psycopg import AsyncConnection

from wai._registry import Registry
from wai._translate import translate_errors

__all__ = ["AsyncClientCore", "borrow", "translated"]


class AsyncClientCore(Protocol):
    """The part of a client that the operations of a feature use."""

    @property
    def schema(self) -> str:
        """The client's (validated) schema name."""
        ...

    @property
    def registry(self) -> Registry:
        """The tasks, follow-up specs, hooks and schedules registered with the client."""
        ...

    def _connection(self) -> AbstractAsyncContextManager[AsyncConnection[Any]]:
        """Borrow an autocommit connection from the client's pool."""
        ...


def borrow(core: AsyncClientCore) -> AbstractAsyncContextManager[AsyncConnection[Any]]:
    """Borrow an autocommit connection of ``core`` (its database errors as they are)."""
    return core._connection()  # pyright: ignore[reportPrivateUsage]


@asynccontextmanager
async def translated(core: AsyncClientCore) -> AsyncIterator[AsyncConnection[Any]]:
    """Borrow a connection of ``core`` whose database errors become wai errors."""
    async with borrow(core) as conn:
        with translate_errors(core.schema):
            yield conn
