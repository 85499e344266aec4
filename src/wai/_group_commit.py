"""Group commit: the single inserts of one async client that arrive together, in one commit.

``AsyncClient(url, group_commit=True)``. Each ``client.insert`` call queues its
validated job and waits; one task of the client's inserts whatever has queued
meanwhile as one statement, one transaction and one commit on one pooled connection,
then hands each caller its own row or its own error (:func:`wai._inserts_db_async.insert_each`).
While a group is being written the next one gathers, so the groups grow with the
load and nothing waits on a timer: a lone insert goes out at once, as a single
insert, and pays one task switch more than without group commit.

A caller that is cancelled before its group is taken is dropped from it; once its
group is on its way its job is inserted anyway (as a single insert cancelled while
its statement runs may have been). If writing a group fails as a whole (a broken
connection, no connection within the pool's timeout), every caller of the group gets
the error and the next group is written as usual. Inserts in a transaction
(``client.transaction()``, the bridges) never go through here.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai import _inserts_db_async as inserts_db
from wai._inserts import NewJob
from wai._job import JobRow
from wai._tracing import otel
from wai.errors import DatabaseError

__all__ = ["MAX_GROUP", "GroupCommit"]

logger = logging.getLogger("wai.client")

#: The most jobs written in one statement; more waiting callers make further groups.
MAX_GROUP = 500

_Waiter = tuple[NewJob, "asyncio.Future[JobRow]"]


class GroupCommit:
    """Coalesces one client's concurrent single inserts into one statement and commit."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConnection[Any]], schema: str) -> None:
        self._pool = pool
        self._schema = schema
        self._waiting: list[_Waiter] = []
        self._writer: asyncio.Task[None] | None = None

    async def insert(self, job: NewJob) -> JobRow:
        """Insert ``job`` with whatever else is waiting; its committed row (traced)."""
        if otel is not None and otel.active():
            with otel.sending("insert", [job]) as sending:
                if sending.trace is not None:
                    (job,) = otel.with_trace([job], sending.trace)
                row = await self._queue(job)
                sending.sent([row])
                return row
        return await self._queue(job)

    def _queue(self, job: NewJob) -> asyncio.Future[JobRow]:
        future: asyncio.Future[JobRow] = asyncio.get_running_loop().create_future()
        self._waiting.append((job, future))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write(), name="wai-group-commit")
        return future

    async def _write(self) -> None:
        """Write groups until none is waiting (started by the first waiting insert)."""
        try:
            while self._waiting:
                group = [w for w in self._waiting[:MAX_GROUP] if not w[1].done()]
                del self._waiting[:MAX_GROUP]
                if group:
                    await self._deliver(group)
        except BaseException:
            # cancelled from outside (the event loop closing): no caller waits forever
            _fail(self._waiting, DatabaseError("the insert was interrupted: its client closed"))
            self._waiting.clear()
            raise
        finally:
            self._writer = None

    async def _deliver(self, group: list[_Waiter]) -> None:
        """Write one group and hand each caller its row or its error."""
        try:
            results = await self._write_group([job for job, _ in group])
            if len(results) != len(group):
                raise RuntimeError(f"{len(results)} results for a group of {len(group)} inserts")
        except BaseException as exc:
            if not isinstance(exc, Exception):
                _fail(group, DatabaseError("the insert was interrupted: its client closed"))
                raise
            # the whole group failed (a broken connection): each caller hears it
            logger.debug("a group of %d inserts failed: %r", len(group), exc)
            _fail(group, exc)
            return
        for (_, future), result in zip(group, results, strict=True):
            if future.done():
                continue  # its caller was cancelled while the group was written
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)

    async def _write_group(self, jobs: list[NewJob]) -> list[JobRow | Exception]:
        conn = await self._pool.getconn()
        try:
            return await inserts_db.insert_each(conn, self._schema, jobs)
        finally:
            await self._pool.putconn(conn)

    async def close(self) -> None:
        """Wait until every queued insert is written (before the pool closes)."""
        while (writer := self._writer) is not None:
            await asyncio.wait([writer])


def _fail(waiters: list[_Waiter], exc: Exception) -> None:
    for _, future in waiters:
        if not future.done():
            future.set_exception(exc)
