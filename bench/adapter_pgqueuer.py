"""The pgqueuer adapter (PyPI ``pgqueuer``, asyncpg driver), as in peer-benchmarks.md.

Settings (the reference's; pgqueuer's default durability ``durable``: every table logged):

* producer: one ``asyncpg.connect(url)``, ``Queries.from_asyncpg_connection(conn)``,
  ``await q.install()``. Single: ``await q.enqueue("noop", payload)``; batch:
  ``await q.enqueue([...], [...], [0] * k)`` per chunk (one unnest INSERT).
* concurrent producers (the ``concurrent`` workload): ``asyncpg.create_pool(url,
  min_size=10, max_size=10)`` and ``Queries.from_asyncpg_pool(pool)``, shared by every
  task; each task ``await q.enqueue("noop", payload)`` per job. pgqueuer's producer above
  holds one connection, on which concurrent tasks would take turns; a pool of 10 is what
  wai's client gets by default (``max_connections=10``), so both libraries have the same
  number of connections to spread the tasks over. Opened, and its 10 connections made,
  before the clock.
* worker (``worker_pgqueuer.py``): one asyncpg connection,
  ``QueueManager(Queries.from_asyncpg_connection(conn))``, one ``@qm.entrypoint("noop")``,
  ``qm.run(batch_size=C // 2, max_concurrent_tasks=C)``. pgqueuer requires
  ``max_concurrent_tasks >= 2 * batch_size``; C/2 is the largest batch it allows and the
  setting of the reference's concurrency sweep (16 at C=32). Everything else default
  (``dequeue_timeout`` 30 s, LISTEN/NOTIFY wake-ups, heartbeat 30 s, log aggregation 30 s).
  The default asyncio event loop, like every other worker here (``pgq run`` would use uvloop).

Args are the JSON bytes ``{"seq": i}`` (plus ``"t"`` for latency jobs), all on the one
entrypoint ``noop``: a second entrypoint would add a branch to every dequeue.

Counting: a finished job is deleted from ``pgqueuer`` and logged in ``pgqueuer_log``.
The log also holds ``queued`` and ``picked`` rows, so the terminal states are read from the
log and the live states (``queued``, ``picked``, held ``failed``) from the queue table.
Log aggregation (every 30 s) only flags log rows, it does not delete them.

``drain1m`` (:meth:`PgqueuerAdapter.fill_terminal_sql`): pgqueuer deletes a finished job
from ``pgqueuer`` and keeps three log rows per job (``queued``, ``picked``,
``successful``), flagged ``aggregated`` once folded into per-second ``pgqueuer_statistics``
buckets, and never deletes either by itself. So ``n`` finished jobs are stored as what a
deployment that ran them at 1,000 jobs/s, ending a minute ago, holds: ``3 n`` aggregated
log rows, their statistics buckets (one per second and status), and the job id sequence
advanced past ``n``. The queue table stays empty.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, ClassVar

from adapter import Adapter

if TYPE_CHECKING:
    import asyncpg

__all__ = ["ENTRYPOINT", "PgqueuerAdapter"]

ENTRYPOINT = "noop"
#: Connections of the concurrent producers' pool (wai's client default max_connections).
POOL_SIZE = 10
#: Log statuses that end a job; a held ``failed`` job stays in the queue table.
TERMINAL = "('successful', 'exception', 'canceled', 'deleted')"


def payload(seq: int, **extra: Any) -> bytes:
    """The job payload: ``{"seq": seq, ...}`` as JSON bytes."""
    return json.dumps({"seq": seq, **extra}, separators=(",", ":")).encode()


class PgqueuerAdapter(Adapter):
    """pgqueuer 1.6 on asyncpg; see the module docstring for the settings."""

    name: ClassVar[str] = "pgqueuer"
    worker_module: ClassVar[str] = "worker_pgqueuer"
    distribution: ClassVar[str] = "pgqueuer"
    drivers: ClassVar[tuple[str, ...]] = ("asyncpg", "psycopg")
    own_venv: ClassVar[bool] = True
    terminal_fill_skip: ClassVar[str | None] = None

    concurrent_skip: ClassVar[str | None] = None

    def __init__(self) -> None:
        self._conn: asyncpg.Connection | None = None
        self._queries: Any = None
        self._pool: asyncpg.Pool | None = None
        self._pool_queries: Any = None
        self._dsn = ""

    def table_filter_sql(self) -> str:
        """``pgqueuer``, ``pgqueuer_log``, ``pgqueuer_statistics`` and the rest."""
        return "relname LIKE 'pgqueuer%'"

    def queue_tables(self) -> tuple[str, ...]:
        """A job is a row of ``pgqueuer`` until it finishes, and three of ``pgqueuer_log``."""
        return ("public.pgqueuer", "public.pgqueuer_log")

    def fill_terminal_sql(self, n: int) -> list[str]:
        """3 aggregated log rows per finished job, their statistics, the id sequence."""
        n = int(n)
        # job g was enqueued at t_g (1 ms apart, the last a minute ago), picked and
        # finished just after it.
        t_g = f"now() - interval '1 minute' - ({n} - g) * interval '1 millisecond'"
        return [
            "INSERT INTO pgqueuer_log (created, job_id, status, priority, entrypoint,"
            " aggregated)"
            f" SELECT {t_g} + s.delay, g, s.status::pgqueuer_status, 0, '{ENTRYPOINT}', true"
            f" FROM generate_series(1, {n}) g CROSS JOIN (VALUES"
            " ('queued', interval '0'), ('picked', interval '200 microseconds'),"
            " ('successful', interval '400 microseconds')) s(status, delay)",
            "INSERT INTO pgqueuer_statistics (count, created, entrypoint, priority, status)"
            " SELECT count(*), date_trunc('sec', created), entrypoint, priority, status"
            " FROM pgqueuer_log WHERE aggregated"
            " GROUP BY entrypoint, priority, status, date_trunc('sec', created)",
            f"SELECT setval(pg_get_serial_sequence('pgqueuer', 'id'), {n})",
        ]

    def fill_watermark_sql(self) -> str:
        """The largest log row id (the drain's log rows get larger ones)."""
        return "SELECT coalesce(max(id), 0) FROM pgqueuer_log"

    def count_completed_after_sql(self, after: int) -> str:
        """``successful`` log rows with ``id > after`` (a primary-key range scan)."""
        return (
            "SELECT (SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
            f" AND id > {int(after)}),"
            " (SELECT count(*) FROM pgqueuer WHERE status = 'picked')"
        )

    def count_completed_sql(self) -> str:
        """``successful`` log rows, and jobs in ``picked`` (claimed, not yet logged)."""
        return (
            "SELECT (SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'),"
            " (SELECT count(*) FROM pgqueuer WHERE status = 'picked')"
        )

    def state_counts_sql(self) -> str:
        """Live jobs per status from the queue table, finished ones from the log."""
        return (
            "SELECT status::text, count(*) FROM pgqueuer GROUP BY 1"
            " UNION ALL SELECT status::text, count(*) FROM pgqueuer_log"
            f" WHERE status IN {TERMINAL} GROUP BY 1 ORDER BY 1"
        )

    def completed_state(self) -> str:
        """pgqueuer logs a finished job as ``successful``."""
        return "successful"

    def pending_state(self) -> str:
        """A new job is ``queued``."""
        return "queued"

    @property
    def queries(self) -> Any:
        """The producer's ``Queries`` (after :meth:`setup`)."""
        assert self._queries is not None, "setup() first"
        return self._queries

    async def setup(self, database_url: str) -> None:
        """Connect and install pgqueuer's tables."""
        import asyncpg
        from pgqueuer.queries import Queries

        self._dsn = database_url
        self._conn = await asyncpg.connect(database_url)
        self._queries = Queries.from_asyncpg_connection(self._conn)
        await self._queries.install()

    async def insert_single(self, start: int, count: int) -> None:
        """``await q.enqueue("noop", payload)`` per job."""
        q = self.queries
        for i in range(start, start + count):
            await q.enqueue(ENTRYPOINT, payload(i))

    async def insert_batch(self, start: int, count: int, chunk: int) -> None:
        """``await q.enqueue([...], [...], [0] * k)`` per chunk."""
        q = self.queries
        end = start + count
        for lo in range(start, end, chunk):
            k = min(lo + chunk, end) - lo
            await q.enqueue([ENTRYPOINT] * k, [payload(i) for i in range(lo, lo + k)], [0] * k)

    async def insert_timed(self, seq: int) -> None:
        """One job whose payload carries ``t = time.time()``."""
        await self.queries.enqueue(ENTRYPOINT, payload(seq, t=time.time()))

    async def insert_timed_many(self, seqs: range, chain_every: int) -> None:
        """One ``enqueue`` of lists (pgqueuer's batch insert), one ``t`` for all."""
        t = time.time()
        k = len(seqs)
        await self.queries.enqueue([ENTRYPOINT] * k, [payload(s, t=t) for s in seqs], [0] * k)

    async def prepare_concurrent(self, producers: int, group_commit: bool) -> None:
        """An asyncpg pool of 10 connections (made now) and its ``Queries``."""
        import asyncpg
        from pgqueuer.queries import Queries

        assert not group_commit, "pgqueuer has no group commit"
        self._pool = await asyncpg.create_pool(self._dsn, min_size=POOL_SIZE, max_size=POOL_SIZE)
        self._pool_queries = Queries.from_asyncpg_pool(self._pool)

    async def insert_concurrent(self, start: int, count: int, producers: int) -> None:
        """``producers`` tasks, each ``await q.enqueue("noop", payload)`` per job, one pool."""
        import asyncio

        q = self._pool_queries
        assert q is not None, "prepare_concurrent() first"

        async def produce(k: int) -> None:
            for i in range(start + k, start + count, producers):
                await q.enqueue(ENTRYPOINT, payload(i))

        await asyncio.gather(*(produce(k) for k in range(producers)))

    async def ping(self) -> None:
        """``SELECT 1`` on the producer's connection, and on every pooled one."""
        assert self._conn is not None
        await self._conn.execute("SELECT 1")
        if self._pool is not None:
            conns = [await self._pool.acquire() for _ in range(POOL_SIZE)]
            for conn in conns:
                await conn.execute("SELECT 1")
                await self._pool.release(conn)

    def origin(self) -> str | None:
        """The directory of the imported ``pgqueuer`` package."""
        from pathlib import Path

        import pgqueuer

        return str(Path(pgqueuer.__file__).parent)

    async def close(self) -> None:
        """Close the connection (and the pool)."""
        if self._pool is not None:
            await self._pool.close()
        if self._conn is not None:
            await self._conn.close()
