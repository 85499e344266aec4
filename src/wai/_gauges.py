"""The gauges that come from the database (queue depth and lag, outbox, dead letters) and
from a client's connection pool, as sources of :data:`wai._metrics.METRICS`.

The database's figures are read every ``interval`` seconds by one task per process and
kept in memory, so a scrape never waits on a query. They cost four small statements a
pass: the latest depth sample the maintenance leader recorded (no count over the jobs
table, so the same over a million finished jobs as over none), the outbox's two counts,
the dead letters per queue, and the flow control of the queues that have it (their
limits and those of their kinds, the ordering keys at work, and the available jobs that
carry an ordering key: never the jobs without one). No pass runs while no exporter reads
the metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai import _db_async as db
from wai._logging import emit
from wai._metrics import METRICS, GaugeSample, Metrics
from wai._supervise import repeat
from wai._tracing import otel_metrics

if TYPE_CHECKING:
    from wai._client_base_async import AsyncClientBase

__all__ = ["DEPTH_WINDOW", "DatabaseGauges", "pool_gauges"]

logger = logging.getLogger("wai.metrics")

#: Minutes of depth samples looked at: a sample older than that is not reported.
DEPTH_WINDOW = 5


class DatabaseGauges:
    """Reads the database's figures on a cadence; :meth:`samples` is a gauge source."""

    def __init__(
        self, client: AsyncClientBase, *, interval: float, source: Metrics = METRICS
    ) -> None:
        self._client = client
        self.interval = interval
        self._source = source
        self._samples: list[GaugeSample] = []
        self._failing = False
        #: Queues that reported ordering keys at work: they report 0 once none is left.
        self._keyed: set[str] = set()
        #: Unix time of the last pass that read everything (None before the first).
        self.sampled_at: float | None = None

    def samples(self) -> Iterator[GaugeSample]:
        """The figures of the last pass that succeeded."""
        yield from self._samples
        if self.sampled_at is not None:
            yield GaugeSample("wai.metrics.sampled_at", (), self.sampled_at)

    async def refresh(self) -> None:
        """Read the figures now; a database error keeps the last ones (and is logged once
        per outage)."""
        client = self._client
        try:
            depths = await client.queue_depth_history(minutes=DEPTH_WINDOW)
            outbox = await client.outbox_stats()
            dead = await client.dlq_depths()
            async with client.pool.connection() as conn:  # opened by the calls above
                flows = await db.queue_flow_figures(conn, client.schema)
        except psycopg.Error as exc:
            if not self._failing:
                emit(logger, logging.WARNING, "wai: metrics: reading the database failed: %s", exc)
            self._failing = True
            return
        self._failing = False
        samples: list[GaugeSample] = []
        if depths:
            latest = max(d.at for d in depths)
            seen: dict[str, set[str]] = {}
            for d in depths:
                seen.setdefault(d.queue, set()).update(d.counts)
            current = {d.queue: d for d in depths if d.at == latest}
            for queue, states in sorted(seen.items()):
                d = current.get(queue)
                # A queue missing from the latest sample has no unfinished job left.
                counts = d.counts if d is not None else {}
                samples.extend(
                    GaugeSample("wai.queue.depth", (queue, state), float(counts.get(state, 0)))
                    for state in sorted(states | set(counts))
                )
                lag = d.oldest_available_lag if d is not None else 0.0
                samples.append(GaugeSample("wai.queue.oldest_available_age", (queue,), lag))
        samples.append(GaugeSample("wai.outbox.pending", (), float(outbox.pending)))
        samples.append(GaugeSample("wai.outbox.failed", (), float(outbox.failed)))
        samples.extend(
            GaugeSample("wai.dlq.depth", (queue,), float(count))
            for queue, count in sorted(dead.items())
        )
        samples.extend(self._flow_samples(flows))
        self._samples = samples
        self.sampled_at = time.time()

    def _flow_samples(self, flows: list[dict[str, Any]]) -> list[GaugeSample]:
        """The flow control gauges of :func:`wai._db_async.queue_flow_figures`' records."""
        samples: list[GaugeSample] = []
        reported: set[str] = set()
        for f in flows:
            queue: str = f["name"]
            if f["rate_tokens"] is not None:
                samples.append(
                    GaugeSample("wai.queue.rate_tokens", (queue,), float(f["rate_tokens"]))
                )
            if f["global_concurrency"] is not None:
                samples.append(
                    GaugeSample(
                        "wai.queue.global_concurrency", (queue,), float(f["global_concurrency"])
                    )
                )
            samples.append(
                GaugeSample("wai.queue.keys_running", (queue,), float(f["keys_running"]))
            )
            samples.append(
                GaugeSample("wai.queue.waiting_turn", (queue,), float(f["waiting_turn"]))
            )
            kinds: dict[str, float] = f["kind_tokens"]
            samples.extend(
                GaugeSample("wai.kind.rate_tokens", (queue, kind), float(tokens))
                for kind, tokens in sorted(kinds.items())
            )
            reported.add(queue)
        # A queue whose keyed jobs are all done leaves the query's answer: say 0 rather
        # than let its last value stand.
        for queue in sorted(self._keyed - reported):
            samples.append(GaugeSample("wai.queue.keys_running", (queue,), 0.0))
            samples.append(GaugeSample("wai.queue.waiting_turn", (queue,), 0.0))
        self._keyed |= reported
        return samples

    async def _pass(self) -> None:
        if otel_metrics is not None:
            otel_metrics.bind(self._source)  # an SDK configured since the last pass
        if self._source.exporters:
            await self.refresh()

    async def run_forever(self) -> None:
        """Refresh every ``interval`` seconds while an exporter reads the metrics, until
        cancelled."""
        await repeat("metrics sampling", self._pass, interval=self.interval)


def pool_gauges(
    pool: AsyncConnectionPool[AsyncConnection[Any]],
) -> Callable[[], Iterator[GaugeSample]]:
    """The gauge source of a client's connection pool."""

    def samples() -> Iterator[GaugeSample]:
        stats = pool.get_stats()
        yield GaugeSample("wai.pool.size", (), float(stats.get("pool_size", 0)))
        yield GaugeSample("wai.pool.available", (), float(stats.get("pool_available", 0)))
        yield GaugeSample("wai.pool.waiting", (), float(stats.get("requests_waiting", 0)))

    return samples
