"""The wai adapter: producer calls on ``wai.AsyncClient`` and the SQL the harness polls."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from adapter import QUEUE, Adapter

if TYPE_CHECKING:
    import wai

__all__ = ["WaiAdapter"]

SCHEMA = "wai"


class WaiAdapter(Adapter):
    """wai with default settings: ``AsyncClient(url)`` (pool 1..10), schema ``wai``."""

    name: ClassVar[str] = "wai"
    worker_module: ClassVar[str] = "worker_wai"
    distribution: ClassVar[str] = "wai"
    drivers: ClassVar[tuple[str, ...]] = ("psycopg", "psycopg-pool")
    supports_followups: ClassVar[bool] = True

    def __init__(self) -> None:
        self._client: wai.AsyncClient | None = None

    def count_completed_sql(self) -> str:
        """Completed jobs, and jobs in ``running`` (claimed, outcome not yet written)."""
        return (
            "SELECT count(*) FILTER (WHERE state = 'completed'),"
            f" count(*) FILTER (WHERE state = 'running') FROM {SCHEMA}.jobs"
        )

    def state_counts_sql(self) -> str:
        """Jobs per state."""
        return f"SELECT state::text, count(*) FROM {SCHEMA}.jobs GROUP BY 1 ORDER BY 1"

    @property
    def client(self) -> wai.AsyncClient:
        """The producer client (after :meth:`setup`)."""
        assert self._client is not None, "setup() first"
        return self._client

    async def setup(self, database_url: str) -> None:
        """Open the client, warm one pooled connection and apply the migrations."""
        import wai

        self._client = wai.AsyncClient(database_url)
        await self._client.open()
        await self._client.pool.wait()  # the first request must not grow the pool
        await self._client.migrate()

    async def insert_single(self, start: int, count: int) -> None:
        """``await client.insert(Noop(seq=i), queue="bench")`` per job."""
        from wai_jobs import Noop

        client = self.client
        for i in range(start, start + count):
            await client.insert(Noop(seq=i), queue=QUEUE)

    async def insert_batch(self, start: int, count: int, chunk: int) -> None:
        """``await client.insert_many([...])`` per chunk (one statement, one transaction)."""
        from wai_jobs import Noop

        from wai import EnqueueRequest

        client = self.client
        end = start + count
        for lo in range(start, end, chunk):
            await client.insert_many(
                [EnqueueRequest(Noop(seq=i), queue=QUEUE) for i in range(lo, min(lo + chunk, end))]
            )

    async def insert_timed(self, seq: int) -> None:
        """One ``Ping(seq, t=time.time())`` job."""
        from wai_jobs import Ping

        await self.client.insert(Ping(seq=seq, t=time.time()), queue=QUEUE)

    def origin(self) -> str | None:
        """The directory of the imported ``wai`` package."""
        import wai

        return str(Path(wai.__file__).parent)

    async def ping(self) -> None:
        """``SELECT 1`` on every connection of the pool (all borrowed at once)."""
        pool = self.client.pool
        size = max(1, pool.get_stats().get("pool_size", 1))
        async with contextlib.AsyncExitStack() as stack:
            conns = [await stack.enter_async_context(pool.connection()) for _ in range(size)]
            for conn in conns:
                await conn.execute("SELECT 1")

    async def close(self) -> None:
        """Close the pool."""
        if self._client is not None:
            await self._client.close()
