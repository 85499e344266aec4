"""psycopg's connection pools, handing out the connection returned last (a stack).

psycopg_pool keeps its idle connections in a queue: each request takes the one idle the
longest, so a client making one request at a time cycles through every connection the
pool holds. Each of them is a server process of its own, and a statement on a process
that has just run one is cheaper than on one that has slept through the others' turns:
a single insert at a time ran about 14 % faster on the connection returned last than
cycling through two (``bench/insert_cost.py``). SQLAlchemy's ``pool_use_lifo`` and
node-postgres make the same choice. The pool still closes an unused connection per
``max_idle`` (10 minutes) down to its minimum, whichever end it lends from.

A connection at the bottom may sit idle for many minutes, long enough for a firewall, a
load balancer or the server's ``idle_session_timeout`` to drop it, where a queue would have
kept every connection in use. So a connection idle in the pool for more than
:data:`IDLE_CHECK` seconds is checked before it is lent (one empty statement, psycopg_pool's
``check_connection``), and one found broken is replaced at once instead of failing its
caller; one returned more recently is lent as it is, at no cost.

The pools override one small private method of psycopg_pool's: the connection returned
last is moved to the queue's head before the pool takes the head. Should a release of
psycopg_pool rename that method, the override goes unused and the pool stays a queue
(``tests/integration/test_pool.py`` says so).
"""

from __future__ import annotations

import time
from typing import Any
from weakref import WeakKeyDictionary

from psycopg import AsyncConnection, Connection
from psycopg_pool import AsyncConnectionPool, ConnectionPool

__all__ = ["IDLE_CHECK", "AsyncStackPool", "StackPool"]

#: Seconds a connection may have been idle in the pool and still be lent unchecked.
IDLE_CHECK = 30.0

#: When each connection was last returned to its pool (monotonic seconds).
_returned: WeakKeyDictionary[Any, float] = WeakKeyDictionary()


def _unchecked(conn: Any) -> bool:
    """Whether ``conn`` came back to its pool recently enough to be lent without a check."""
    returned = _returned.get(conn)
    return returned is not None and time.monotonic() - returned < IDLE_CHECK


async def _check_async(conn: AsyncConnection[Any]) -> None:
    if not _unchecked(conn):
        await AsyncConnectionPool.check_connection(conn)


def _check_sync(conn: Connection[Any]) -> None:
    if not _unchecked(conn):
        ConnectionPool.check_connection(conn)


class AsyncStackPool(AsyncConnectionPool[AsyncConnection[Any]]):
    """An :class:`~psycopg_pool.AsyncConnectionPool` lending its last returned connection,
    checked first when it was idle for more than :data:`IDLE_CHECK` seconds."""

    def __init__(self, conninfo: str = "", **kwargs: Any) -> None:
        super().__init__(conninfo, check=_check_async, **kwargs)

    async def putconn(self, conn: AsyncConnection[Any]) -> None:
        """Return ``conn`` to the pool, noting when."""
        _returned[conn] = time.monotonic()
        await super().putconn(conn)

    async def _get_ready_connection(self, timeout: float | None) -> AsyncConnection[Any] | None:
        idle = self._pool
        if len(idle) > 1:
            idle.rotate(1)  # the connection returned last to the head the pool takes
        return await super()._get_ready_connection(timeout)


class StackPool(ConnectionPool[Connection[Any]]):
    """A :class:`~psycopg_pool.ConnectionPool` lending its last returned connection,
    checked first when it was idle for more than :data:`IDLE_CHECK` seconds."""

    def __init__(self, conninfo: str = "", **kwargs: Any) -> None:
        super().__init__(conninfo, check=_check_sync, **kwargs)

    def putconn(self, conn: Connection[Any]) -> None:
        """Return ``conn`` to the pool, noting when."""
        _returned[conn] = time.monotonic()
        super().putconn(conn)

    def _get_ready_connection(self, timeout: float | None) -> Connection[Any] | None:
        idle = self._pool
        if len(idle) > 1:
            idle.rotate(1)
        return super()._get_ready_connection(timeout)
