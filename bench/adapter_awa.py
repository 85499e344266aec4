"""The awa adapter (PyPI ``awa-pg``: a Rust runtime on sqlx, Python handlers via PyO3), as
in peer-benchmarks.md.

Settings (the reference's; awa's defaults otherwise, default durability):

* producer: ``AsyncClient(url)`` (sqlx pool, at most 10 connections), ``migrate()``.
  Single: ``await client.insert(Noop(seq=i), queue="bench")``; batch:
  ``await client.enqueue_many_copy(jobs, queue="bench")`` per chunk (COPY straight into
  queue storage).
* a fresh database stays on awa's deprecated ``canonical`` engine until a worker runtime
  starts, and ``enqueue_many_copy`` needs queue storage, so :meth:`AwaAdapter.setup`
  starts and shuts down a runtime once (a production cluster's first worker does the
  same). Every awa figure is on the queue-storage engine, awa's default since 0.6.
* worker (``worker_awa.py``): ``@client.task(Noop, queue="bench")`` (and ``Ping``),
  ``await client.start([("bench", C)])`` with all defaults (``poll_interval_ms=200``,
  1 claimer, claim batch 512, ring rotation 1 s, role ``auto``), stopped with
  ``await client.shutdown()``. The reference found ``claimers=2`` slightly slower.

Counting: queue storage records completions as receipt batches
(``receipt_completion_batches``: arrays of job ids, no per-job row update) and, about a
second after a ready partition is all terminal, maintenance prunes it and adds its
completions to ``queue_terminal_rollups.pruned_completed_count``. So "completed" is
receipts - receipt tombstones + ``done_entries`` + pruned rollups. A drain that ends
near a rotation would otherwise lose its completions from the count before it is read.

awa's own view ``awa.jobs`` (``awa.jobs_compat()``) gives the same states but expands
every receipt against the ready partition with a nested loop: about 1.6 s for 2,000
completed jobs and 160 s for 20,000. :meth:`AwaAdapter.state_counts_sql` therefore
counts the same sources directly; ``BENCH_AWA_VIEW_VERIFY=1`` verifies through the view
(plus the pruned rollups) instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from adapter import QUEUE, Adapter

if TYPE_CHECKING:
    import awa

__all__ = ["AwaAdapter", "Noop", "Ping"]

#: awa's queue-storage schema (the default, ``awa``).
S = "awa"
#: The producer client's pool size (awa's default).
MAX_CONNECTIONS = 10


@dataclass
class Noop:
    """A no-op job: args ``{"seq": i}`` (kind ``noop``)."""

    seq: int


@dataclass
class Ping:
    """A latency job: args ``{"seq": i, "t": time.time()}`` (kind ``ping``)."""

    seq: int
    t: float


def _pruned(state: str) -> str:
    """Completed (or failed) jobs of the bench queue that maintenance has pruned."""
    if state == "failed":
        return f"SELECT sum(pruned_failed_count) FROM {S}.queue_terminal_rollups WHERE queue = %s"
    # queue_lanes.pruned_completed_count is the pre-rollup location; awa reads the larger.
    return (
        "SELECT sum(GREATEST(coalesce(l.pruned_completed_count, 0),"
        " coalesce(r.pruned_completed_count, 0)))"
        f" FROM (SELECT priority, pruned_completed_count FROM {S}.queue_lanes"
        "  WHERE queue = %s) l"
        f" FULL JOIN (SELECT priority, pruned_completed_count FROM {S}.queue_terminal_rollups"
        "  WHERE queue = %s) r USING (priority)"
    )


def _q(sql: str) -> str:
    """``sql`` with every ``%s`` replaced by the quoted bench queue name."""
    return sql.replace("%s", f"'{QUEUE}'")


COMPLETED_SQL = _q(
    "SELECT coalesce((SELECT sum(completed_count) FROM "
    f"{S}.receipt_completion_batches WHERE queue = %s), 0)"
    f" - (SELECT count(*) FROM {S}.receipt_completion_tombstones WHERE queue = %s)"
    f" + (SELECT count(*) FROM {S}.done_entries WHERE queue = %s AND state = 'completed')"
    f" + coalesce(({_pruned('completed')}), 0)"
)

#: One row per (job, attempt) completed through a receipt and not tombstoned.
_RECEIPTS = (
    "SELECT i.job_id, i.run_lease"
    f" FROM {S}.receipt_completion_batches b"
    " CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases) AS i(job_id, run_lease)"
    " WHERE b.queue = %s AND NOT EXISTS ("
    f"  SELECT 1 FROM {S}.receipt_completion_tombstones t"
    "   WHERE t.ready_slot = b.ready_slot AND t.ready_generation = b.ready_generation"
    "   AND t.job_id = i.job_id AND t.run_lease = i.run_lease)"
)

STATE_COUNTS_SQL = _q(
    f"WITH receipts AS MATERIALIZED ({_RECEIPTS})"
    " SELECT state, sum(n)::bigint FROM ("
    # available: ready rows at or past the lane's claim cursor, not tombstoned
    "  SELECT 'available' AS state, count(*) AS n"
    f"  FROM {S}.ready_entries r JOIN {S}.queue_claim_heads h"
    "   ON h.queue = r.queue AND h.priority = r.priority AND h.enqueue_shard = r.enqueue_shard"
    f"  WHERE r.queue = %s AND r.lane_seq >= {S}.sequence_next_value(h.seq_name)"
    f"  AND NOT EXISTS (SELECT 1 FROM {S}.ready_tombstones t"
    "   WHERE t.ready_slot = r.ready_slot AND t.ready_generation = r.ready_generation"
    "   AND t.queue = r.queue AND t.priority = r.priority"
    "   AND t.enqueue_shard = r.enqueue_shard AND t.lane_seq = r.lane_seq)"
    f"  UNION ALL SELECT state::text, count(*) FROM {S}.deferred_jobs WHERE queue = %s GROUP BY 1"
    f"  UNION ALL SELECT state::text, count(*) FROM {S}.leases WHERE queue = %s GROUP BY 1"
    # running: claim receipts with no closure, lease, deferral, outcome or DLQ entry yet
    "  UNION ALL SELECT 'running', count(*)"
    f"  FROM {S}.lease_claims c WHERE c.queue = %s AND c.closed_at IS NULL"
    f"  AND NOT EXISTS (SELECT 1 FROM {S}.lease_claim_closures x WHERE x.claim_slot = c.claim_slot"
    "   AND x.job_id = c.job_id AND x.run_lease = c.run_lease)"
    f"  AND NOT EXISTS (SELECT 1 FROM {S}.lease_claim_closure_batches x"
    "   WHERE x.receipt_ranges @> c.receipt_id)"
    f"  AND NOT EXISTS (SELECT 1 FROM {S}.leases x"
    "   WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease)"
    f"  AND NOT EXISTS (SELECT 1 FROM {S}.deferred_jobs x"
    "   WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease)"
    f"  AND NOT EXISTS (SELECT 1 FROM {S}.done_entries x"
    "   WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease)"
    f"  AND NOT EXISTS (SELECT 1 FROM {S}.dlq_entries x"
    "   WHERE x.job_id = c.job_id AND x.run_lease = c.run_lease)"
    "  AND (c.job_id, c.run_lease) NOT IN (SELECT job_id, run_lease FROM receipts)"
    f"  UNION ALL SELECT state::text, count(*) FROM {S}.done_entries WHERE queue = %s GROUP BY 1"
    "  UNION ALL SELECT 'completed', count(*) FROM receipts"
    f"  UNION ALL SELECT state::text, count(*) FROM {S}.dlq_entries WHERE queue = %s GROUP BY 1"
    f"  UNION ALL SELECT 'completed', ({_pruned('completed')})"
    f"  UNION ALL SELECT 'failed', ({_pruned('failed')})"
    " ) s GROUP BY 1 HAVING sum(n) > 0 ORDER BY 1"
)

VIEW_STATE_COUNTS_SQL = _q(
    "SELECT state, sum(n)::bigint FROM ("
    f" SELECT state::text AS state, count(*) AS n FROM {S}.jobs WHERE queue = %s GROUP BY 1"
    f" UNION ALL SELECT 'completed', ({_pruned('completed')})"
    f" UNION ALL SELECT 'failed', ({_pruned('failed')})"
    ") s GROUP BY 1 HAVING sum(n) > 0 ORDER BY 1"
)


class AwaAdapter(Adapter):
    """awa-pg 0.6 on its queue-storage engine; see the module docstring for the settings."""

    name: ClassVar[str] = "awa"
    worker_module: ClassVar[str] = "worker_awa"
    distribution: ClassVar[str] = "awa-pg"
    drivers: ClassVar[tuple[str, ...]] = ()  # awa talks to PostgreSQL from Rust (sqlx)
    own_venv: ClassVar[bool] = True
    terminal_fill_skip: ClassVar[str | None] = (
        "awa's queue storage keeps no table of finished jobs to grow: completions are "
        "receipt batches in a ring of rotating partitions that maintenance prunes about "
        "a second after they are all terminal, keeping only rollup counts "
        "(queue_terminal_rollups), so a long-running awa deployment holds no terminal rows"
    )

    def __init__(self) -> None:
        self._client: awa.AsyncClient | None = None

    def table_filter_sql(self) -> str:
        """Every table of awa's schema (queue storage partitions included)."""
        return f"schemaname = '{S}'"

    def count_completed_sql(self) -> str:
        """Completed jobs: receipts - tombstones + done entries + pruned (see module doc)."""
        return COMPLETED_SQL

    def state_counts_sql(self) -> str:
        """Jobs per state from awa's tables, or its ``awa.jobs`` view if asked (slow)."""
        if os.environ.get("BENCH_AWA_VIEW_VERIFY") == "1":
            return VIEW_STATE_COUNTS_SQL
        return STATE_COUNTS_SQL

    @property
    def client(self) -> awa.AsyncClient:
        """The producer client (after :meth:`setup`)."""
        assert self._client is not None, "setup() first"
        return self._client

    async def setup(self, database_url: str) -> None:
        """Migrate, then start and stop a runtime once to activate queue storage."""
        import awa

        self._client = client = awa.AsyncClient(database_url, MAX_CONNECTIONS)
        await client.migrate()

        @client.task(Noop, queue=QUEUE)
        async def noop(job: awa.Job) -> None:  # never runs: nothing is queued yet
            pass

        await client.start([(QUEUE, 1)])
        await client.shutdown()
        status = await client.storage_status()
        if '"active_engine": "queue_storage"' not in str(status):
            raise RuntimeError(f"awa did not switch to queue storage: {status}")

    async def insert_single(self, start: int, count: int) -> None:
        """``await client.insert(Noop(seq=i), queue="bench")`` per job."""
        client = self.client
        for i in range(start, start + count):
            await client.insert(Noop(seq=i), queue=QUEUE)

    async def insert_batch(self, start: int, count: int, chunk: int) -> None:
        """``await client.enqueue_many_copy([...], queue="bench")`` per chunk."""
        client = self.client
        end = start + count
        for lo in range(start, end, chunk):
            await client.enqueue_many_copy(
                [Noop(seq=i) for i in range(lo, min(lo + chunk, end))], queue=QUEUE
            )

    async def insert_timed(self, seq: int) -> None:
        """One ``Ping(seq, t=time.time())`` job."""
        await self.client.insert(Ping(seq=seq, t=time.time()), queue=QUEUE)

    async def ping(self) -> None:
        """``SELECT 1`` on every pooled connection: ``MAX_CONNECTIONS`` transactions at once.

        The sqlx pool is not reachable from Python; holding as many transactions open
        together as the pool has connections makes each use a different one.
        """
        client = self.client
        held = 0
        all_held = asyncio.Event()

        async def one() -> None:
            nonlocal held
            tx = await client.transaction()
            async with tx:
                await tx.execute("SELECT 1")
                held += 1
                if held == MAX_CONNECTIONS:
                    all_held.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(all_held.wait(), 5)

        await asyncio.gather(*(one() for _ in range(MAX_CONNECTIONS)))

    def origin(self) -> str | None:
        """The directory of the imported ``awa`` package."""
        from pathlib import Path

        import awa

        return str(Path(awa.__file__).parent)

    async def close(self) -> None:
        """Close the pool."""
        if self._client is not None:
            await self._client.close()
