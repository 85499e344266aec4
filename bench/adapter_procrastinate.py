"""The procrastinate adapter (PyPI ``procrastinate``, psycopg 3 + psycopg_pool), as in
peer-benchmarks.md.

Settings (the reference's; procrastinate's defaults otherwise, with its default
durability: logged tables, synchronous commits):

* producer: ``App(connector=PsycopgConnector(conninfo=url))`` (psycopg_pool default:
  4 connections), ``await app.open_async()``,
  ``await app.schema_manager.apply_schema_async()``. Single:
  ``await noop.defer_async(seq=i)``; batch: ``await noop.batch_defer_async(*kwargs)`` per
  chunk (one multi-row INSERT).
* worker (``worker_procrastinate.py``): the same task ``noop`` (queue ``bench``) and
  ``app.run_worker_async(queues=["bench"], concurrency=C, wait=True, listen_notify=True,
  install_signal_handlers=False)``, stopped by cancelling its task. The worker's pool is
  raised to min 4 / max ``C + 4`` connections (36 at C=32, as in the reference): with
  the default 4, 32 slots would queue for connections. Other defaults:
  ``fetch_job_polling_interval=5``, ``delete_jobs="never"`` (finished jobs stay, with
  status ``succeeded``). procrastinate's worker fetches one job per query in one loop.

The task is ``noop(seq, t=None)``: the throughput jobs carry exactly ``{"seq": i}``,
the latency jobs ``{"seq": i, "t": ...}``.

``drain1m`` (:meth:`ProcrastinateAdapter.fill_terminal_sql`): with ``delete_jobs="never"``
a finished job stays in ``procrastinate_jobs`` with status ``succeeded``, and its three
``procrastinate_events`` (``deferred``, ``started``, ``succeeded``) stay too. ``n`` such
jobs and ``3 n`` events are generated in SQL (the event times 1 ms apart per job, the
last a minute ago). A row inserted as ``succeeded`` fires none of procrastinate's
triggers (they fire for ``todo`` rows and status updates only).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

from adapter import QUEUE, Adapter

if TYPE_CHECKING:
    import procrastinate

__all__ = ["TASK_NAME", "ProcrastinateAdapter", "make_app"]

TASK_NAME = "noop"


def make_app(url: str, on_job: Any = None, **pool_args: Any) -> procrastinate.App:
    """An ``App`` on ``url`` with the bench task ``noop`` (calls ``on_job(seq, t)``)."""
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url, **pool_args))

    @app.task(name=TASK_NAME, queue=QUEUE)
    async def noop(seq: int, t: float | None = None) -> None:
        if on_job is not None:
            on_job(seq, t)

    return app


class ProcrastinateAdapter(Adapter):
    """procrastinate 3.10 on psycopg 3; see the module docstring for the settings."""

    name: ClassVar[str] = "procrastinate"
    worker_module: ClassVar[str] = "worker_procrastinate"
    distribution: ClassVar[str] = "procrastinate"
    drivers: ClassVar[tuple[str, ...]] = ("psycopg", "psycopg-pool")
    own_venv: ClassVar[bool] = True
    terminal_fill_skip: ClassVar[str | None] = None

    def __init__(self) -> None:
        self._app: procrastinate.App | None = None

    def table_filter_sql(self) -> str:
        """``procrastinate_jobs``, ``procrastinate_events`` and the rest."""
        return "relname LIKE 'procrastinate%'"

    def fill_terminal_sql(self, n: int) -> list[str]:
        """``n`` ``succeeded`` jobs and their three events each."""
        n = int(n)
        t_j = f"now() - interval '1 minute' - ({n} - j.id) * interval '1 millisecond'"
        return [
            "INSERT INTO procrastinate_jobs (queue_name, task_name, priority, args, status,"
            f" attempts) SELECT '{QUEUE}', '{TASK_NAME}', 0, jsonb_build_object('seq', g),"
            f" 'succeeded', 1 FROM generate_series(1, {n}) g",
            "INSERT INTO procrastinate_events (job_id, type, at)"
            f" SELECT j.id, e.type::procrastinate_job_event_type, {t_j} + e.delay"
            " FROM procrastinate_jobs j CROSS JOIN (VALUES"
            " ('deferred', interval '0'), ('started', interval '200 microseconds'),"
            " ('succeeded', interval '400 microseconds')) e(type, delay)"
            " WHERE j.status = 'succeeded' ORDER BY j.id, e.delay",
        ]

    def fill_watermark_sql(self) -> str:
        """The largest job id (the prefill's jobs get larger ones)."""
        return "SELECT coalesce(max(id), 0) FROM procrastinate_jobs"

    def count_completed_after_sql(self, after: int) -> str:
        """:meth:`count_completed_sql` over ``id > after`` (a primary-key range scan)."""
        return (
            "SELECT count(*) FILTER (WHERE status = 'succeeded'),"
            " count(*) FILTER (WHERE status = 'doing') FROM procrastinate_jobs"
            f" WHERE id > {int(after)}"
        )

    def count_completed_sql(self) -> str:
        """``succeeded`` jobs, and jobs in ``doing`` (fetched, outcome not yet written)."""
        return (
            "SELECT count(*) FILTER (WHERE status = 'succeeded'),"
            " count(*) FILTER (WHERE status = 'doing') FROM procrastinate_jobs"
        )

    def state_counts_sql(self) -> str:
        """Jobs per status."""
        return "SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY 1 ORDER BY 1"

    def completed_state(self) -> str:
        """procrastinate marks a finished job ``succeeded``."""
        return "succeeded"

    def pending_state(self) -> str:
        """A deferred job is ``todo``."""
        return "todo"

    @property
    def app(self) -> procrastinate.App:
        """The producer app (after :meth:`setup`)."""
        assert self._app is not None, "setup() first"
        return self._app

    async def setup(self, database_url: str) -> None:
        """Open the app (default pool) and apply procrastinate's schema."""
        self._app = make_app(database_url)
        await self._app.open_async()
        await self._app.schema_manager.apply_schema_async()

    def _task(self) -> Any:
        return self.app.tasks[TASK_NAME]

    async def insert_single(self, start: int, count: int) -> None:
        """``await noop.defer_async(seq=i)`` per job."""
        task = self._task()
        for i in range(start, start + count):
            await task.defer_async(seq=i)

    async def insert_batch(self, start: int, count: int, chunk: int) -> None:
        """``await noop.batch_defer_async(*kwargs)`` per chunk."""
        task = self._task()
        end = start + count
        for lo in range(start, end, chunk):
            await task.batch_defer_async(*({"seq": i} for i in range(lo, min(lo + chunk, end))))

    async def insert_timed(self, seq: int) -> None:
        """One job whose args carry ``t = time.time()``."""
        await self._task().defer_async(seq=seq, t=time.time())

    async def ping(self) -> None:
        """``SELECT 1`` on every connection of the pool (all borrowed at once)."""
        import contextlib

        pool = self.app.connector.pool  # type: ignore[attr-defined]
        size = max(1, pool.get_stats().get("pool_size", 1))
        async with contextlib.AsyncExitStack() as stack:
            conns = [await stack.enter_async_context(pool.connection()) for _ in range(size)]
            for conn in conns:
                await conn.execute("SELECT 1")

    def origin(self) -> str | None:
        """The directory of the imported ``procrastinate`` package."""
        from pathlib import Path

        import procrastinate

        return str(Path(procrastinate.__file__).parent)

    async def close(self) -> None:
        """Close the app's pool."""
        if self._app is not None:
            await self._app.close_async()
