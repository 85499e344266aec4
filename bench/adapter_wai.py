"""The wai adapter: producer calls on ``wai.AsyncClient`` and the SQL the harness polls."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

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
    supports_cpu_handler: ClassVar[bool] = True
    terminal_fill_skip: ClassVar[str | None] = None
    concurrent_skip: ClassVar[str | None] = None
    supports_group_commit: ClassVar[bool] = True

    def __init__(self) -> None:
        self._client: wai.AsyncClient | None = None
        self._url = ""
        #: The concurrent producers' client: ``AsyncClient(url, group_commit=...)``.
        self._concurrent: wai.AsyncClient | None = None

    def count_completed_sql(self) -> str:
        """Completed jobs, and jobs in ``running`` (claimed, outcome not yet written)."""
        return (
            "SELECT count(*) FILTER (WHERE state = 'completed'),"
            f" count(*) FILTER (WHERE state = 'running') FROM {SCHEMA}.jobs"
        )

    def state_counts_sql(self) -> str:
        """Jobs per state."""
        return f"SELECT state::text, count(*) FROM {SCHEMA}.jobs GROUP BY 1 ORDER BY 1"

    def table_filter_sql(self) -> str:
        """Every table of the ``wai`` schema."""
        return f"schemaname = '{SCHEMA}'"

    def queue_tables(self) -> tuple[str, ...]:
        """Every job is one row of ``wai.jobs``, from insert to retention cleanup."""
        return (f"{SCHEMA}.jobs",)

    def fill_terminal_sql(self, n: int) -> list[str]:
        """``n`` completed ``noop`` jobs finalized a minute ago, generated in SQL.

        The worker's retention cleanup keeps completed jobs for a day by default, so
        these stay through the run.
        """
        return [
            f"INSERT INTO {SCHEMA}.jobs (kind, queue, args, state, finalized_at, attempt,"
            " run_lease) SELECT 'noop', 'bench', jsonb_build_object('seq', g), 'completed',"
            f" now() - interval '1 minute', 1, 1 FROM generate_series(1, {int(n)}) g"
        ]

    def fill_watermark_sql(self) -> str:
        """The largest job id (the prefill's jobs get larger ones)."""
        return f"SELECT coalesce(max(id), 0) FROM {SCHEMA}.jobs"

    def count_completed_after_sql(self, after: int) -> str:
        """:meth:`count_completed_sql` over ``id > after`` (a primary-key range scan)."""
        return (
            "SELECT count(*) FILTER (WHERE state = 'completed'),"
            f" count(*) FILTER (WHERE state = 'running') FROM {SCHEMA}.jobs"
            f" WHERE id > {int(after)}"
        )

    @property
    def client(self) -> wai.AsyncClient:
        """The producer client (after :meth:`setup`)."""
        assert self._client is not None, "setup() first"
        return self._client

    async def setup(self, database_url: str) -> None:
        """Open the client, warm one pooled connection and apply the migrations."""
        import wai

        self._url = database_url
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

    async def prepare_concurrent(self, producers: int, group_commit: bool) -> None:
        """A client of its own, ``AsyncClient(url, group_commit=group_commit)`` (pool 1..10),
        with its 10 connections made now, as pgqueuer's pool of 10 is."""
        import wai

        client = self._concurrent = wai.AsyncClient(self._url, group_commit=group_commit)
        await client.open()
        await _borrow_all(client.pool)

    async def insert_concurrent(self, start: int, count: int, producers: int) -> None:
        """``producers`` tasks, each ``await client.insert(Noop(seq=i), queue="bench")`` per job."""
        import asyncio

        from wai_jobs import Noop

        client = self._concurrent
        assert client is not None, "prepare_concurrent() first"

        async def produce(k: int) -> None:
            for i in range(start + k, start + count, producers):
                await client.insert(Noop(seq=i), queue=QUEUE)

        await asyncio.gather(*(produce(k) for k in range(producers)))

    async def insert_timed(self, seq: int) -> None:
        """One ``Ping(seq, t=time.time())`` job."""
        from wai_jobs import Ping

        await self.client.insert(Ping(seq=seq, t=time.time()), queue=QUEUE)

    async def insert_chained(self, seq: int) -> None:
        """One ``Chained(seq, t=time.time())`` job; the worker enqueues a ``Done`` on completion."""
        from wai_jobs import Chained

        await self.client.insert(Chained(seq=seq, t=time.time()), queue=QUEUE)

    async def insert_timed_many(self, seqs: range, chain_every: int) -> None:
        """``client.insert_many`` of ``Ping``/``Chained`` jobs sharing one ``t``."""
        from wai_jobs import Chained, Ping

        import wai

        t = time.time()
        await self.client.insert_many(
            [
                wai.EnqueueRequest(
                    Chained(seq=s, t=t)
                    if chain_every and s % chain_every == 0
                    else Ping(seq=s, t=t),
                    queue=QUEUE,
                )
                for s in seqs
            ]
        )

    def origin(self) -> str | None:
        """The directory of the imported ``wai`` package."""
        import wai

        return str(Path(wai.__file__).parent)

    async def ping(self) -> None:
        """``SELECT 1`` on every connection of the pools (all borrowed at once)."""
        for client in (self.client, self._concurrent):
            if client is not None:
                pool = client.pool
                await _borrow_all(pool, max(1, pool.get_stats().get("pool_size", 1)))

    async def close(self) -> None:
        """Close the pools."""
        if self._concurrent is not None:
            await self._concurrent.close()
        if self._client is not None:
            await self._client.close()


async def _borrow_all(pool: Any, size: int | None = None) -> None:
    """Borrow ``size`` connections (the pool's most) at once, ``SELECT 1`` on each."""
    async with contextlib.AsyncExitStack() as stack:
        conns = [
            await stack.enter_async_context(pool.connection()) for _ in range(size or pool.max_size)
        ]
        for conn in conns:
            await conn.execute("SELECT 1")
