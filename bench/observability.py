"""The drain with tracing and metrics on, against the same drain with them off.

``.venv/bin/python bench/observability.py [--jobs 20000] [--runs 3] [--concurrency 128]
[--modes off,prometheus,otel,sampled,traced]``

Each run is a fresh worker process (OpenTelemetry's providers are process-wide), on a
scratch database created and dropped around it, draining ``--jobs`` no-op jobs loaded
beforehand (the worst case for any per-job cost: the handler does nothing). The modes
take turns, run by run:

- ``off``: opentelemetry-api installed (as in wai's test extra) but no SDK provider set,
  and nothing reads wai's metrics: what every user without observability pays.
- ``prometheus``: the Prometheus endpoint's collector rendered every second (a scrape),
  the database's gauges read every second; no OpenTelemetry SDK.
- ``otel``: ``prometheus``, plus an SDK ``MeterProvider`` whose
  ``PeriodicExportingMetricReader`` collects every second (metrics through both).
- ``sampled``: ``otel``, plus an SDK ``TracerProvider`` sampling 10 % of the traces
  (``ParentBased(TraceIdRatioBased(0.1))``, the usual production set-up) with a
  ``BatchSpanProcessor``.
- ``traced``: the same, sampling every trace: one recorded ``process`` span per attempt.

Spans go to an exporter that counts and drops them, metrics to one that counts its
exports: the SDK's cost without a network. Reports jobs/s per run, the medians, and each
mode against ``off``. The target: at least 0.9.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

HERE = Path(__file__).resolve().parent
QUEUE = "bench"
MODES = ("off", "prometheus", "otel", "sampled", "traced")


def _worker(url: str, mode: str, jobs: int, concurrency: int) -> dict[str, Any]:
    """One drain in a child process; returns what it measured."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--url", url, "--jobs", str(jobs),
         "--concurrency", str(concurrency)],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"{mode} run failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _setup_observability(mode: str) -> dict[str, Any]:
    """A mode's SDK providers and exporters; returns the counters of what they saw."""
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import (
        MetricExporter,
        MetricExportResult,
        MetricsData,
        PeriodicExportingMetricReader,
    )
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    seen = {"spans": 0, "metric_exports": 0}

    class Spans(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            seen["spans"] += len(spans)
            return SpanExportResult.SUCCESS

    class Metrics(MetricExporter):
        def export(
            self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
        ) -> MetricExportResult:
            seen["metric_exports"] += 1
            return MetricExportResult.SUCCESS

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return True

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            return None

    if mode in ("sampled", "traced"):
        sampler = ParentBased(TraceIdRatioBased(0.1)) if mode == "sampled" else None
        tracer_provider = TracerProvider(sampler=sampler)
        tracer_provider.add_span_processor(BatchSpanProcessor(Spans()))
        trace.set_tracer_provider(tracer_provider)
    if mode != "prometheus":
        reader = PeriodicExportingMetricReader(Metrics(), export_interval_millis=1000)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return seen


async def _child(url: str, mode: str, jobs: int, concurrency: int) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from wai_jobs import Noop

    import wai
    from wai._metrics import METRICS

    seen: dict[str, Any] = {}
    scrapes = 0
    if mode != "off":
        seen = _setup_observability(mode)
    client = wai.AsyncClient(url)
    done = 0

    @client.task(Noop, queue=QUEUE)
    async def noop(job: wai.Job[Noop]) -> None:
        nonlocal done
        done += 1

    await client.open()
    await client.migrate()
    # loaded before the clock starts, as the peer benchmark's drain does
    await client.copy_many([wai.EnqueueRequest(Noop(seq=i), queue=QUEUE) for i in range(jobs)])
    scraping: asyncio.Task[None] | None = None
    settings: dict[str, Any] = {}
    if mode != "off":
        from wai import _prometheus

        registry = _prometheus.registry()
        settings["metrics_interval"] = 1.0

        async def scrape() -> None:
            nonlocal scrapes
            while True:
                await asyncio.sleep(1.0)
                _prometheus.render(registry)
                scrapes += 1

        scraping = asyncio.create_task(scrape())
    t0 = time.perf_counter()
    await client.start({QUEUE: concurrency}, **settings)
    async with client.pool.connection() as conn:
        while True:
            cur = await conn.execute(
                "SELECT count(*) FROM wai.jobs WHERE state = 'completed'"  # type: ignore[arg-type]
            )
            row = await cur.fetchone()
            if row is not None and row[0] >= jobs:
                break
            await asyncio.sleep(0.05)
    elapsed = time.perf_counter() - t0
    await client.shutdown()
    if scraping is not None:
        scraping.cancel()
    await client.close()
    completed = METRICS.outcomes["completed"].snapshot().get((QUEUE, "noop"), 0)
    if mode in ("sampled", "traced"):
        from opentelemetry import trace

        trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
    return {
        "mode": mode,
        "jobs": jobs,
        "seconds": elapsed,
        "rate": jobs / elapsed,
        "handled": done,
        "counted_completed": completed,
        "spans": seen.get("spans", 0),
        "metric_exports": seen.get("metric_exports", 0),
        "scrapes": scrapes,
    }


def _with_db(url: str, name: str) -> str:
    """``url`` naming database ``name`` (a host URL or a Unix socket's ``?host=`` one)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


def _scratch(url: str, name: str, create: bool) -> None:
    with psycopg.connect(_with_db(url, "postgres"), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[arg-type]
        if create:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--database-url",
        default=os.environ.get(
            "BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    parser.add_argument("--dbname", default="wai_bench_obs")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--child", choices=MODES)
    parser.add_argument("--url")
    opts = parser.parse_args()
    if opts.child:
        print(json.dumps(asyncio.run(_child(opts.url, opts.child, opts.jobs, opts.concurrency))))
        return
    modes = [m for m in opts.modes.split(",") if m]
    if "off" not in modes or any(m not in MODES for m in modes):
        raise SystemExit(f"--modes: some of {', '.join(MODES)}, off included")
    scratch = _with_db(opts.database_url, opts.dbname)
    rates: dict[str, list[float]] = {m: [] for m in modes}
    for run in range(opts.runs):
        for mode in modes if run % 2 == 0 else modes[::-1]:
            _scratch(opts.database_url, opts.dbname, create=True)
            try:
                result = _worker(scratch, mode, opts.jobs, opts.concurrency)
            finally:
                _scratch(opts.database_url, opts.dbname, create=False)
            if result["handled"] < opts.jobs or result["counted_completed"] < opts.jobs:
                raise SystemExit(f"a run lost count: {result}")
            if mode == "traced" and result["spans"] < opts.jobs:
                raise SystemExit(f"tracing was not on: {result}")
            rates[mode].append(result["rate"])
            print(
                f"run {run + 1} {mode:>10}: {result['rate']:8,.0f} jobs/s "
                f"({result['seconds']:.2f} s; spans {result['spans']:,}, metric exports "
                f"{result['metric_exports']}, scrapes {result['scrapes']})",
                flush=True,
            )
    off = statistics.median(rates["off"])
    print(f"\ndrain of {opts.jobs:,} jobs, {opts.concurrency} slots, median of {opts.runs}:")
    print("| mode | jobs/s (min-max) | against off |\n|---|---|---|")
    for mode in modes:
        median = statistics.median(rates[mode])
        print(
            f"| {mode} | {median:,.0f} ({min(rates[mode]):,.0f}-{max(rates[mode]):,.0f}) "
            f"| {median / off:.2f} |"
        )


if __name__ == "__main__":
    main()
