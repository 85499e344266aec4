"""psycopg's connection pools, handing out the connection returned last (a stack).

psycopg_pool keeps its idle connections in a queue: each request takes the one idle the
longest, so a client making one request at a time cycles through every connection the
pool holds. Each of them is a server process of its own, and a statement on a process
that has just run one is cheaper than on one that has slept through the others' turns:
a single insert at a time ran about 14 % faster on the connection returned last than
cycling through two (``bench/insert_cost.py``). A stack also leaves the connections a
burst opened idle at the bottom, where the pool's ``max_idle`` closes them, rather than
keeping every one of them just warm enough to stay open. SQLAlchemy's ``pool_use_lifo``
and node-postgres make the same choice.

The pools override one small private method of psycopg_pool's: the connection returned
last is moved to the queue's head before the pool takes the head. Should a release of
psycopg_pool rename that method, the override goes unused and the pool stays a queue
(``tests/integration/test_pool.py`` says so).
"""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection, Connection
from psycopg_pool import AsyncConnectionPool, ConnectionPool

__all__ = ["AsyncStackPool", "StackPool"]


class AsyncStackPool(AsyncConnectionPool[AsyncConnection[Any]]):
    """An :class:`~psycopg_pool.AsyncConnectionPool` lending its last returned connection."""

    async def _get_ready_connection(self, timeout: float | None) -> AsyncConnection[Any] | None:
        idle = self._pool
        if len(idle) > 1:
            idle.rotate(1)  # the connection returned last to the head the pool takes
        return await super()._get_ready_connection(timeout)


class StackPool(ConnectionPool[Connection[Any]]):
    """A :class:`~psycopg_pool.ConnectionPool` lending its last returned connection."""

    def _get_ready_connection(self, timeout: float | None) -> Connection[Any] | None:
        idle = self._pool
        if len(idle) > 1:
            idle.rotate(1)
        return super()._get_ready_connection(timeout)
