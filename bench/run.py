"""Benchmark job-queue libraries on a fresh PostgreSQL database per workload run.

Usage::

    .venv/bin/python bench/run.py [--runs 3] [--jobs 20000] \\
        [--only insert,batch,drain,latency] [--concurrency 32,128] [--json PATH]

Workloads (the definitions of ``shared/reference/peer-benchmarks.md``):

* ``insert``: ``--jobs`` sequential awaited single inserts, one transaction each.
* ``batch``: ``--jobs`` jobs through the batch API in chunks of ``--chunk``.
* ``drain``: prefill ``--jobs`` jobs, ANALYZE, start one worker child process,
  clock from GO until a poll of the completed count reaches ``--jobs``; once per
  ``--concurrency`` value.
* ``latency``: an idle worker (32 slots) for 2 s, then 200 single inserts 20 ms
  apart carrying ``t = time.time()``; the handler records ``time.time() - t``.

Opt-in workloads (not in the default ``--only``; the first two are long):

* ``drain1m``: the drain, after storing ``--terminal-rows`` (1,000,000) finished jobs
  the way the library keeps them (``VACUUM ANALYZE`` and ``CHECKPOINT`` after), run
  next to the plain drain (added if not selected), with the ratio drain1m / drain.
* ``soak``: a producer inserting ``--soak-rate`` jobs/s in batches of ``--soak-batch``
  for ``--soak-seconds`` (600) while one worker drains; dead tuples, table and index
  sizes, throughput kept and backlog at the end.
* ``cpu2`` (wai only): handlers that burn ``--cpu-ms`` (1) of CPU, drained by one
  worker process and by ``--cpu2-processes`` (2) of them, with the ratio.
* ``concurrent``: ``--jobs`` single inserts from ``--producers`` (32) asyncio tasks of
  one producer process at once, each task one awaited insert after another (request
  handlers enqueueing); the tasks share the library's pool of connections (see each
  adapter). For wai twice, alternating: its defaults (``concurrent_p32``) and
  ``group_commit=True`` (``concurrent_gc_p32``, compared with the peers' only run).

Each run creates the database (``wai_bench``), runs, and drops it. Producer and
worker are child processes started with each adapter's interpreter (see
``adapter.py``); this process only orchestrates, polls and reads counters.

``--adapters wai,awa,pgqueuer,procrastinate`` runs the libraries one after the other;
the peers' virtualenvs come from ``bench/setup_peers.sh`` and are found in
``bench/.venvs/<name>``. With more than one adapter the report ends with the medians
side by side and a "wai / peer" ratio table.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from adapter import ADAPTERS, BENCH_DIR, Adapter, load_adapter
from harness import (
    Child,
    DbStats,
    PgCpu,
    db_url,
    drop_database,
    fresh_database,
    machine_busy_seconds,
    next_poll,
    percentile,
    proc_cpu_seconds,
    quiet_gate,
    summarize,
    wait_for_no_backends,
)

#: Every workload ``--only`` accepts; the default set is :data:`DEFAULT_WORKLOADS`.
WORKLOADS = (
    "insert",
    "batch",
    "drain",
    "followups",
    "latency",
    "drain1m",
    "soak",
    "cpu2",
    "concurrent",
)
#: The default ``--only``. ``drain1m`` (a 1M-row fill per run), ``soak`` (10 minutes),
#: ``cpu2`` and ``concurrent`` are opt-in.
DEFAULT_WORKLOADS = ("insert", "batch", "drain", "followups", "latency")
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432"
#: A PostgreSQL 15 backend flushes its statistics at most once a second while busy,
#: and within about a second of going idle: wait this long before a "before" snapshot.
STATS_SETTLE = 1.1


@dataclass(slots=True)
class Options:
    """Command-line options."""

    server_url: str
    dbname: str
    runs: int
    jobs: int
    chunk: int
    only: list[str]
    concurrency: list[int]
    latency_jobs: int
    latency_interval: float
    latency_slots: int
    idle: float
    poll_interval: float
    quiet_pct: float
    quiet_wait: float
    noisy_pct: float
    retries: int
    adapters: list[str]
    sequential: bool = False
    terminal_rows: int = 1_000_000
    soak_seconds: float = 600.0
    soak_rate: float = 500.0
    soak_batch: int = 50
    soak_concurrency: int = 32
    soak_poll: float = 5.0
    cpu_ms: float = 1.0
    cpu2_processes: int = 2
    cpu2_concurrency: int = 32
    cpu2_handler: str = "async"
    producers: int = 32
    python: dict[str, str] = field(default_factory=dict[str, str])
    session_options: str = ""
    json_path: str | None = None


def parse_args(argv: list[str] | None = None) -> Options:
    """Parse and validate the command line."""
    p = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_URL),
        help="server to use; its database part is replaced by --dbname",
    )
    p.add_argument("--dbname", default="wai_bench", help="scratch database, dropped after each run")
    p.add_argument("--runs", type=int, default=3, help="runs per workload")
    p.add_argument("--jobs", type=int, default=20_000, help="jobs per insert/batch/drain run")
    p.add_argument("--chunk", type=int, default=1_000, help="jobs per batch insert call")
    p.add_argument(
        "--only",
        default=",".join(DEFAULT_WORKLOADS),
        help=f"workloads to run, from {', '.join(WORKLOADS)}; drain1m (a 1M-row fill per "
        "run), soak (--soak-seconds per run) and cpu2 are opt-in: name them here",
    )
    p.add_argument("--concurrency", default="32,128", help="worker slots for the drain runs")
    p.add_argument("--latency-jobs", type=int, default=200)
    p.add_argument("--latency-interval", type=float, default=0.02, help="seconds between inserts")
    p.add_argument("--latency-slots", type=int, default=32)
    p.add_argument("--idle", type=float, default=2.0, help="worker idle time before latency")
    p.add_argument(
        "--poll-interval",
        type=float,
        default=0.05,
        help="drain completion poll, first and last (s)",
    )
    g = p.add_argument_group("drain1m (opt-in)")
    g.add_argument(
        "--terminal-rows",
        type=int,
        default=1_000_000,
        help="finished jobs stored before each drain1m prefill (smaller for quick checks)",
    )
    g = p.add_argument_group("soak (opt-in)")
    g.add_argument("--soak-seconds", type=float, default=600.0, help="producer run time (s)")
    g.add_argument("--soak-rate", type=float, default=500.0, help="jobs/s offered")
    g.add_argument("--soak-batch", type=int, default=50, help="jobs per batch insert")
    g.add_argument("--soak-concurrency", type=int, default=32, help="worker slots")
    g.add_argument(
        "--soak-poll", type=float, default=5.0, help="seconds between progress/dead-tuple polls"
    )
    g = p.add_argument_group("cpu2 (opt-in, wai only)")
    g.add_argument("--cpu-ms", type=float, default=1.0, help="CPU each handler burns (ms)")
    g.add_argument(
        "--cpu2-processes", type=int, default=2, help="worker processes compared with one"
    )
    g.add_argument("--cpu2-concurrency", type=int, default=32, help="slots per worker process")
    g.add_argument(
        "--cpu2-handler",
        choices=("async", "sync", "both"),
        default="async",
        help="async: busy loop in an async def handler (in the event loop); sync: in a "
        "def handler (wai's thread pool, under the GIL)",
    )
    g = p.add_argument_group("concurrent (opt-in)")
    g.add_argument("--producers", type=int, default=32, help="producer tasks inserting at once")
    p.add_argument(
        "--quiet-pct",
        type=float,
        default=15.0,
        help="before each run wait until machine CPU is below this %% of one core",
    )
    p.add_argument(
        "--quiet-wait",
        type=float,
        default=60.0,
        help="longest quiet wait (s); 0 samples the machine once (0.5 s) and goes on",
    )
    p.add_argument(
        "--noisy-pct",
        type=float,
        default=50.0,
        help="a run during which other processes used more than this %% of a core is noisy",
    )
    p.add_argument("--retries", type=int, default=1, help="repeats of a noisy run")
    p.add_argument("--adapters", default="wai", help=f"libraries to run: {', '.join(ADAPTERS)}")
    p.add_argument(
        "--sequential",
        action="store_true",
        help="every workload of one library, then the next library; by default the libraries "
        "take turns: run 1 of a workload for each library, then run 2, and so on, so that a "
        "machine whose speed drifts during the benchmark drifts under all of them alike",
    )
    p.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="interpreter (virtualenv) of an adapter; else $BENCH_PYTHON_<NAME>, else "
        "bench/.venvs/<name>/bin/python (bench/setup_peers.sh), else this one (wai only)",
    )
    p.add_argument(
        "--session-options",
        default="",
        metavar="OPTS",
        help="diagnostics only: libpq 'options' for the library's sessions, e.g. "
        "'-c plan_cache_mode=force_custom_plan' (the server is never reconfigured)",
    )
    p.add_argument("--json", dest="json_path", help="write raw results to this file")
    a = p.parse_args(argv)
    only = [w.strip() for w in a.only.split(",") if w.strip()]
    bad = sorted(set(only) - set(WORKLOADS))
    if bad:
        p.error(f"unknown workload(s) {bad}; choose from {', '.join(WORKLOADS)}")
    try:
        concurrency = [int(c) for c in a.concurrency.split(",") if c.strip()]
    except ValueError:
        p.error("--concurrency takes integers, e.g. 32,128")
    if a.runs < 1 or a.jobs < 1 or a.chunk < 1 or any(c < 1 for c in concurrency):
        p.error("--runs, --jobs, --chunk and --concurrency must be positive")
    if a.terminal_rows < 1 or a.soak_batch < 1 or a.soak_concurrency < 1:
        p.error("--terminal-rows, --soak-batch and --soak-concurrency must be positive")
    if a.soak_seconds <= 0 or a.soak_rate <= 0 or a.soak_poll <= 0 or a.cpu_ms <= 0:
        p.error("--soak-seconds, --soak-rate, --soak-poll and --cpu-ms must be positive")
    if a.producers < 1:
        p.error("--producers must be positive")
    if a.cpu2_processes < 2 or a.cpu2_concurrency < 1:
        p.error("--cpu2-processes must be at least 2, --cpu2-concurrency positive")
    python: dict[str, str] = {}
    for item in a.python:
        name, sep, path = item.partition("=")
        if not sep:
            p.error("--python takes NAME=PATH")
        python[name] = path
    adapters = [n.strip() for n in a.adapters.split(",") if n.strip()]
    for n in adapters:
        if n not in ADAPTERS:
            p.error(f"unknown adapter {n!r}; known: {', '.join(ADAPTERS)}")
    return Options(
        server_url=a.database_url,
        dbname=a.dbname,
        runs=a.runs,
        jobs=a.jobs,
        chunk=a.chunk,
        only=only,
        concurrency=concurrency,
        latency_jobs=a.latency_jobs,
        latency_interval=a.latency_interval,
        latency_slots=a.latency_slots,
        idle=a.idle,
        poll_interval=a.poll_interval,
        quiet_pct=a.quiet_pct,
        quiet_wait=a.quiet_wait,
        noisy_pct=a.noisy_pct,
        retries=max(0, a.retries),
        adapters=adapters,
        sequential=a.sequential,
        terminal_rows=a.terminal_rows,
        soak_seconds=a.soak_seconds,
        soak_rate=a.soak_rate,
        soak_batch=a.soak_batch,
        soak_concurrency=a.soak_concurrency,
        soak_poll=a.soak_poll,
        cpu_ms=a.cpu_ms,
        cpu2_processes=a.cpu2_processes,
        cpu2_concurrency=a.cpu2_concurrency,
        cpu2_handler=a.cpu2_handler,
        producers=a.producers,
        python=python,
        session_options=a.session_options,
        json_path=a.json_path,
    )


# -- the environment --------------------------------------------------------------------


def machine_info() -> dict[str, Any]:
    """CPU count and model, RAM, kernel."""
    model = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_kib = 0
    with contextlib.suppress(OSError), open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
                break
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "ram_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
    }


def source_info() -> dict[str, Any]:
    """The wai tree measured: git HEAD, uncommitted files, and a hash of the sources."""
    root = BENCH_DIR.parent
    src = root / "src"
    out: dict[str, Any] = {}

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    out["git_head"] = git("rev-parse", "--short", "HEAD")
    out["src_uncommitted_files"] = len(git("status", "--porcelain", "--", "src").splitlines())
    digest = hashlib.sha256()
    for path in sorted(src.rglob("*")):
        if path.suffix in {".py", ".sql"} and path.is_file():
            digest.update(str(path.relative_to(src)).encode())
            digest.update(path.read_bytes())
    out["src_sha256"] = digest.hexdigest()[:12]
    return out


def server_info(admin: psycopg.Connection[Any]) -> dict[str, Any]:
    """Server version and the settings that matter for a queue benchmark."""
    out: dict[str, Any] = {}
    row = admin.execute("SELECT version()").fetchone()
    out["version"] = row[0] if row else "?"
    names = [
        "server_version",
        "synchronous_commit",
        "fsync",
        "shared_buffers",
        "wal_level",
        "max_connections",
        "autovacuum",
        "stats_fetch_consistency",
    ]
    rows = admin.execute(
        "SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)", (names,)
    ).fetchall()
    settings: dict[str, str] = {}
    for name, setting, unit in rows:
        if name == "shared_buffers" and unit == "8kB":
            settings[name] = f"{int(setting) * 8 // 1024}MB"
        else:
            settings[name] = setting
    out["settings"] = settings
    return out


# -- one adapter, all workloads ---------------------------------------------------------


class Bench:
    """Runs every selected workload of one adapter."""

    def __init__(self, opts: Options, adapter: Adapter, admin: psycopg.Connection[Any]) -> None:
        self.opts = opts
        self.adapter = adapter
        self.admin = admin
        self.admin_url = db_url(opts.server_url, "postgres")
        self.url = db_url(opts.server_url, opts.dbname)
        #: The URL the library under test gets (the harness's own sessions use ``url``).
        self.child_url = self.url
        if opts.session_options:
            sep = "&" if "?" in self.url else "?"
            self.child_url = f"{self.url}{sep}options={quote(opts.session_options)}"
        self.python = adapter.python(opts.python)
        self.pg_cpu = PgCpu.discover(admin)
        self.env_info: dict[str, Any] = {}
        #: Selected workloads that do not apply to this adapter, with the reason.
        self.skipped: dict[str, str] = {}

    # -- plumbing ---------------------------------------------------------------------

    @contextlib.contextmanager
    def database(self) -> Iterator[None]:
        """A freshly created scratch database, dropped afterwards."""
        fresh_database(self.admin_url, self.opts.dbname)
        try:
            yield
        finally:
            drop_database(self.admin_url, self.opts.dbname)

    def producer(self) -> Child:
        """Start the producer child and wait until its schema is installed."""
        child = Child(
            [
                self.python,
                str(BENCH_DIR / "producer.py"),
                "--adapter",
                self.adapter.name,
                "--url",
                self.child_url,
            ]
        )
        try:
            ready = child.expect_json(timeout=120)
        except BaseException:
            child.close(timeout=5)
            raise
        for key in ("version", "origin", "prefix", "python", "psycopg", "drivers"):
            if key in ready:
                self.env_info[key] = ready[key]
        return child

    def worker(
        self,
        concurrency: int,
        *,
        followups: bool = False,
        cpu_ms: float = 0.0,
        sync_handler: bool = False,
        options: list[str] | None = None,
    ) -> Child:
        """Start the worker child and wait for READY (connected, nothing started).

        ``options``: more command-line options for the worker script, as they are.
        """
        extra = ["--followups"] if followups else []
        extra += options or []
        if cpu_ms > 0:
            extra += ["--cpu-ms", repr(cpu_ms), *(["--sync-handler"] if sync_handler else [])]
        child = Child(
            [
                self.python,
                str(BENCH_DIR / f"{self.adapter.worker_module}.py"),
                "--url",
                self.child_url,
                "--concurrency",
                str(concurrency),
                *extra,
            ]
        )
        try:
            line = child.expect(timeout=120)
        except BaseException:
            child.close(timeout=5)
            raise
        if line != "READY":
            child.close(timeout=5)
            raise RuntimeError(f"worker said {line!r}, expected READY")
        return child

    def settle(self, prod: Child | None, conns: list[psycopg.Connection[Any]]) -> float:
        """Wait for a quiet machine, then make idle backends flush their statistics.

        A PostgreSQL 15 backend that flushed less than 1 s ago keeps new counts
        pending for up to 10 s of idleness; its next transaction after that second
        flushes them. So: wait, then run one trivial statement on every connection
        that stays open across the "before" snapshot.
        """
        time.sleep(STATS_SETTLE)
        quiet = quiet_gate(self.opts.quiet_pct, self.opts.quiet_wait)
        if prod is not None:
            prod.send(json.dumps({"cmd": "ping"}))
            prod.expect_json(timeout=30)
        for conn in conns:
            conn.execute("SELECT 1")
        return quiet

    def other_sessions(self) -> int:
        """Sessions on other databases of the server (other users of a shared box)."""
        row = self.admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname IS NOT NULL"
            " AND datname NOT IN (%s, 'postgres') AND pid <> pg_backend_pid()",
            (self.opts.dbname,),
        ).fetchone()
        return int(row[0]) if row else 0

    def state_counts(self) -> dict[str, int]:
        """Jobs per state, through the adapter's own query."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            return {str(s): int(n) for s, n in conn.execute(self.adapter.state_counts_sql())}

    def cpu_window(
        self, clients: Child | list[Child], exclude: list[int]
    ) -> Callable[[], dict[str, Any]]:
        """Start a CPU measurement; the returned function ends it and gives the figures.

        ``clients``: the child process(es) measured as "client" (their CPU is summed;
        ``clients_cpu_s`` has each). ``exclude``: backend pids of the harness itself
        (the drain poll).
        """
        children = clients if isinstance(clients, list) else [clients]
        me = os.getpid()
        c0 = [c.cpu_seconds() for c in children]
        pg0 = self.pg_cpu.ours(self.admin, self.opts.dbname, exclude)
        srv0 = self.pg_cpu.server()
        own0 = proc_cpu_seconds(me)
        m0, t0 = machine_busy_seconds()

        def stop() -> dict[str, Any]:
            m1, t1 = machine_busy_seconds()
            c1 = [c.cpu_seconds() for c in children]
            pg1 = self.pg_cpu.ours(self.admin, self.opts.dbname, exclude)
            srv1 = self.pg_cpu.server()
            own1 = proc_cpu_seconds(me)
            wall = t1 - t0
            each = [b - a for a, b in zip(c0, c1, strict=True)]
            client_s, own_s, machine_s = sum(each), own1 - own0, m1 - m0
            pg_s = self.pg_cpu.between(pg0, pg1)
            server_s = srv1 - srv0
            return {
                "wall_s": wall,
                "client_cpu_s": client_s,
                "clients_cpu_s": each,
                "pg_cpu_s": pg_s,
                "pg_server_cpu_s": server_s,
                "harness_cpu_s": own_s,
                "client_cpu_pct": 100 * client_s / wall,
                "pg_cpu_pct": 100 * pg_s / wall,
                "machine_cpu_pct": 100 * machine_s / wall,
                "other_cpu_pct": 100 * (machine_s - client_s - pg_s - own_s) / wall,
            }

        return stop

    def table_stats(self) -> dict[str, Any]:
        """Rows, dead tuples, sizes and vacuums of the library's tables, and index sizes.

        From ``pg_stat_user_tables``/``pg_stat_user_indexes`` (the adapter's
        :meth:`~adapter.Adapter.table_filter_sql`), on a new connection: call it
        outside the measured windows. Sizes in bytes: ``table`` is
        ``pg_relation_size`` (main fork), ``indexes`` ``pg_indexes_size``, ``total``
        ``pg_total_relation_size`` (with TOAST, free space and visibility maps).
        """
        where = self.adapter.table_filter_sql()
        cols = (
            "table",
            "live",
            "dead",
            "table_bytes",
            "index_bytes",
            "total_bytes",
            "ins",
            "upd",
            "hot_upd",
            "del",
            "vacuums",
            "autovacuums",
        )
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            tables = [
                dict(zip(cols, row, strict=True))
                for row in conn.execute(
                    "SELECT schemaname || '.' || relname, n_live_tup, n_dead_tup,"
                    " pg_relation_size(relid), pg_indexes_size(relid),"
                    " pg_total_relation_size(relid), n_tup_ins, n_tup_upd, n_tup_hot_upd,"
                    " n_tup_del, vacuum_count, autovacuum_count"
                    f" FROM pg_stat_user_tables WHERE {where}"
                    " ORDER BY pg_total_relation_size(relid) DESC, 1"
                )
            ]
            indexes = [
                {"table": t, "index": i, "bytes": b, "scans": n}
                for t, i, b, n in conn.execute(
                    "SELECT schemaname || '.' || relname, indexrelname,"
                    " pg_relation_size(indexrelid), idx_scan"
                    f" FROM pg_stat_user_indexes WHERE {where}"
                    " ORDER BY pg_relation_size(indexrelid) DESC, 1, 2"
                )
            ]
        return {"tables": tables, "indexes": indexes}

    def fill_terminal(self, n: int) -> dict[str, Any]:
        """Store ``n`` finished jobs (the adapter's SQL), VACUUM ANALYZE, CHECKPOINT.

        The checkpoint writes the fill's dirty pages out now rather than during the
        drain (a deployment's old rows were written out long ago).
        """
        with psycopg.connect(self.url, autocommit=True) as conn:
            t = time.perf_counter()
            for stmt in self.adapter.fill_terminal_sql(n):
                conn.execute(stmt)
            fill_s = time.perf_counter() - t
            row = conn.execute(self.adapter.fill_watermark_sql()).fetchone()
            assert row is not None
            t = time.perf_counter()
            conn.execute("VACUUM ANALYZE")
            vacuum_s = time.perf_counter() - t
            t = time.perf_counter()
            conn.execute("CHECKPOINT")
            checkpoint_s = time.perf_counter() - t
        return {
            "rows": n,
            "watermark": int(row[0]),
            "fill_s": round(fill_s, 2),
            "vacuum_s": round(vacuum_s, 2),
            "checkpoint_s": round(checkpoint_s, 2),
            **self.table_stats(),
        }

    @staticmethod
    def per_job(delta: dict[str, int], jobs: int, cpu: dict[str, float]) -> dict[str, float]:
        """Counters and CPU divided by the number of jobs."""
        return {
            "xacts_per_job": delta["xact_commit"] / jobs,
            "rollbacks_per_job": delta["xact_rollback"] / jobs,
            "ins_per_job": delta["tup_inserted"] / jobs,
            "upd_per_job": delta["tup_updated"] / jobs,
            "del_per_job": delta["tup_deleted"] / jobs,
            "wal_bytes_per_job": delta["wal_bytes"] / jobs,
            "client_cpu_ms_per_job": 1000 * cpu["client_cpu_s"] / jobs,
            "pg_cpu_ms_per_job": 1000 * cpu["pg_cpu_s"] / jobs,
        }

    # -- workloads --------------------------------------------------------------------

    def run_insert(self, mode: str, *, group_commit: bool = False) -> dict[str, Any]:
        """One single-insert (``mode="insert"``), batch-insert (``"batch"``) or concurrent
        single-insert (``"concurrent"``, with the library's group commit if asked) run."""
        n = self.opts.jobs
        producers = self.opts.producers
        cmd: dict[str, Any] = {"cmd": "insert_single", "start": 0, "count": n}
        if mode == "batch":
            cmd = {"cmd": "insert_batch", "start": 0, "count": n, "chunk": self.opts.chunk}
        elif mode == "concurrent":
            cmd = {"cmd": "insert_concurrent", "start": 0, "count": n, "producers": producers}
        with self.database():
            prod = self.producer()
            try:
                if mode == "concurrent":  # before the clock: connect the producers' pool
                    prepare = {"producers": producers, "group_commit": group_commit}
                    prod.send(json.dumps({"cmd": "prepare_concurrent", **prepare}))
                    prod.expect_json(timeout=120)
                quiet = self.settle(prod, [])
                others = self.other_sessions()
                before = DbStats.read(self.admin, self.opts.dbname)
                window = self.cpu_window(prod, [])
                prod.send(json.dumps(cmd))
                reply = prod.expect_json(timeout=1800)
                cpu = window()
            finally:
                prod.close()
            wait_for_no_backends(self.admin, self.opts.dbname)
            delta = DbStats.read(self.admin, self.opts.dbname).delta(self.admin, before)
            states = self.state_counts()
        elapsed = float(reply["elapsed"])
        ok = states == {self.adapter.pending_state(): n}
        return {
            "rate": n / elapsed,
            "elapsed_s": elapsed,
            "quiet_pct": quiet,
            "other_sessions": others,
            "delta": delta,
            "cpu": cpu,
            **self.per_job(delta, n, cpu),
            "states": states,
            "verified": ok,
        }

    def run_drain(
        self,
        concurrency: int,
        *,
        followups: bool = False,
        terminal_rows: int = 0,
        processes: int = 1,
        cpu_ms: float = 0.0,
        sync_handler: bool = False,
    ) -> dict[str, Any]:
        """One drain run with ``concurrency`` slots in each of ``processes`` worker processes.

        With ``followups`` every job enqueues one follow-up job with its completion
        (wai only): the run ends when triggers and follow-ups, 2 x ``--jobs``, are done.
        With ``terminal_rows`` (drain1m) that many finished jobs are stored first
        (:meth:`fill_terminal`), and the poll counts only completions above the fill's
        id watermark. ``cpu_ms`` (cpu2) makes each handler burn that much CPU.
        """
        prefilled = self.opts.jobs
        n = prefilled * 2 if followups else prefilled
        pending, done = self.adapter.pending_state(), self.adapter.completed_state()
        fill: dict[str, Any] | None = None
        with self.database():
            prod = self.producer()
            try:
                if terminal_rows:
                    fill = self.fill_terminal(terminal_rows)
                prod.send(
                    json.dumps(
                        {
                            "cmd": "insert_batch",
                            "start": 0,
                            "count": prefilled,
                            "chunk": self.opts.chunk,
                        }
                    )
                )
                prefill = prod.expect_json(timeout=600)
            finally:
                prod.close()
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute("ANALYZE")
            count_sql = self.adapter.count_completed_sql()
            states0 = {pending: prefilled}
            if fill is not None:
                count_sql = self.adapter.count_completed_after_sql(fill["watermark"])
                states0 = self.state_counts()
            workers: list[Child] = []
            try:
                workers.extend(
                    self.worker(
                        concurrency, followups=followups, cpu_ms=cpu_ms, sync_handler=sync_handler
                    )
                    for _ in range(processes)
                )
                with psycopg.connect(self.url, autocommit=True) as poll:
                    row = poll.execute("SELECT pg_backend_pid()").fetchone()
                    assert row is not None
                    poll_pid = int(row[0])
                    poll.execute(count_sql)  # plan it once, outside the measurement
                    quiet = self.settle(None, [poll])
                    others = self.other_sessions()
                    before = DbStats.read(self.admin, self.opts.dbname)
                    poll_cpu0 = proc_cpu_seconds(poll_pid)
                    window = self.cpu_window(workers, [poll_pid])
                    t0 = time.perf_counter()
                    for worker in workers:
                        worker.send("GO")
                    progress, polls, elapsed = self._poll_until(poll, count_sql, n, t0)
                    cpu = window()
                    cpu["poll_pg_cpu_s"] = proc_cpu_seconds(poll_pid) - poll_cpu0
                for worker in workers:
                    worker.send("STOP")
                reports = [worker.expect_json(timeout=120) for worker in workers]
            finally:
                for worker in workers:
                    worker.close()
            wait_for_no_backends(self.admin, self.opts.dbname)
            delta = DbStats.read(self.admin, self.opts.dbname).delta(self.admin, before)
            states = self.state_counts()
            after = self.table_stats() if fill is not None else None
        delta["harness_polls"] = polls
        delta["xact_commit"] -= polls  # our own polling transactions
        handled = sum(int(r["handled"]) for r in reports)
        # Every pending job completed; whatever the fill stored is still there.
        expected = {s: c for s, c in states0.items() if s != pending}
        expected[done] = expected.get(done, 0) + n
        ok = states == expected and handled == n
        first = next((t for t, c, _ in progress if c > 0), math.nan)
        flights = [f for _, _, f in progress if f is not None]
        strip = [{k: v for k, v in r.items() if k != "latencies"} for r in reports]
        worker_info = strip[0] if processes == 1 else {"handled": handled, "processes": strip}
        res: dict[str, Any] = {
            "concurrency": concurrency,
            "processes": processes,
            "rate": n / elapsed,
            "elapsed_s": elapsed,
            "first_completion_s": first,
            "max_in_flight": max(flights) if flights else None,
            "prefill_s": prefill["elapsed"],
            "quiet_pct": quiet,
            "other_sessions": others,
            "delta": delta,
            "cpu": cpu,
            **self.per_job(delta, n, cpu),
            "progress": progress,
            "worker": worker_info,
            "states_before": states0,
            "states": states,
            "verified": ok,
        }
        if cpu_ms:
            res["cpu_ms"] = cpu_ms
            res["handler"] = "sync" if sync_handler else "async"
        if fill is not None:
            res["fill"] = fill
            res["tables_after"] = after
        return res

    def _poll_until(
        self, poll: psycopg.Connection[Any], count_sql: str, target: int, t0: float
    ) -> tuple[list[tuple[float, int, int | None]], int, float]:
        """Poll the completed count until it reaches ``target``.

        Every ``--poll-interval`` until the first completion and again near the end, and
        in between at a quarter of the time left at the rate since the first completion
        (at most :data:`harness.POLL_MAX`): a poll counts the queue's tables, which costs
        the server milliseconds per 10,000 rows (a fixed 50-ms cadence took 16 % of a core
        from a drain of 50,000 jobs). The end is seen within ``--poll-interval``
        unless the rate more than quadruples late in the drain.

        Returns the (seconds, completed, in flight) series, the number of polls and
        the time of the poll that saw ``target``.
        """
        interval = self.opts.poll_interval
        progress: list[tuple[float, int, int | None]] = []
        polls = 0
        timeout = max(300.0, target / 50)
        due = interval
        first: tuple[float, int] | None = None  # the first poll that saw a completion
        while True:
            delay = t0 + due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            row = poll.execute(count_sql).fetchone()
            polls += 1
            now = time.perf_counter() - t0
            count = int(row[0]) if row else 0
            in_flight = int(row[1]) if row is not None and len(row) > 1 else None
            progress.append((round(now, 4), count, in_flight))
            if count >= target:
                return progress, polls, now
            if now > timeout:
                raise TimeoutError(f"only {count} of {target} jobs completed after {now:.0f} s")
            if first is None and count > 0:
                first = (now, count)
            done, seconds = (count - first[1], now - first[0]) if first else (0, 0.0)
            due = now + next_poll(done, target - count, seconds, interval)

    def run_latency(self) -> dict[str, Any]:
        """One pickup-latency run: idle worker, then spaced single inserts."""
        n = self.opts.latency_jobs
        with self.database():
            prod = self.producer()
            worker: Child | None = None
            try:
                worker = self.worker(self.opts.latency_slots)
                quiet = self.settle(prod, [])
                others = self.other_sessions()
                worker.send("GO")
                time.sleep(self.opts.idle)
                before = DbStats.read(self.admin, self.opts.dbname)
                window = self.cpu_window(worker, [])
                prod.send(
                    json.dumps(
                        {"cmd": "latency", "count": n, "interval": self.opts.latency_interval}
                    )
                )
                reply = prod.expect_json(timeout=600)
                with psycopg.connect(self.url, autocommit=True) as poll:
                    deadline = time.monotonic() + 60
                    while True:
                        row = poll.execute(self.adapter.count_completed_sql()).fetchone()
                        if (row is not None and row[0] >= n) or time.monotonic() > deadline:
                            break
                        time.sleep(0.05)
                cpu = window()
                worker.send("STOP")
                report = worker.expect_json(timeout=120)
            finally:
                prod.close()
                if worker is not None:
                    worker.close()
            wait_for_no_backends(self.admin, self.opts.dbname)
            delta = DbStats.read(self.admin, self.opts.dbname).delta(self.admin, before)
            states = self.state_counts()
        samples_ms = [1000 * s for s in report["latencies"]]
        done = self.adapter.completed_state()
        ok = states == {done: n} and len(samples_ms) == n
        return {
            "p50_ms": percentile(samples_ms, 50),
            "p95_ms": percentile(samples_ms, 95),
            "p99_ms": percentile(samples_ms, 99),
            "max_ms": max(samples_ms, default=math.nan),
            "mean_ms": sum(samples_ms) / len(samples_ms) if samples_ms else math.nan,
            "insert_elapsed_s": reply["elapsed"],
            "quiet_pct": quiet,
            "other_sessions": others,
            "delta": delta,
            "cpu": cpu,
            "samples_ms": samples_ms,
            "worker": {k: v for k, v in report.items() if k != "latencies"},
            "states": states,
            "verified": ok,
        }

    def run_soak(self) -> dict[str, Any]:
        """One soak run: a fixed-rate producer and one worker, side by side.

        The producer inserts ``--soak-batch`` jobs every ``batch / rate`` s for
        ``--soak-seconds``; the worker (``--soak-concurrency`` slots) starts with it.
        The window (counters, CPU) ends when the producer finishes; the completed
        count and the backlog are read at that moment, then the worker is stopped
        and the tables are measured once every session has gone (so every backend's
        statistics, dead tuples included, are flushed).
        """
        o = self.opts
        where = self.adapter.table_filter_sql()
        count_sql = self.adapter.count_completed_sql()
        dead_sql = (
            "SELECT coalesce(sum(n_dead_tup), 0)::bigint, coalesce(sum(n_live_tup), 0)::bigint"
            f" FROM pg_stat_user_tables WHERE {where}"
        )
        row = self.admin.execute("SHOW autovacuum").fetchone()
        autovacuum = str(row[0]) if row else "?"
        with self.database():
            prod = self.producer()
            worker: Child | None = None
            try:
                worker = self.worker(o.soak_concurrency)
                with psycopg.connect(self.url, autocommit=True) as poll:
                    row = poll.execute("SELECT pg_backend_pid()").fetchone()
                    assert row is not None
                    poll_pid = int(row[0])
                    poll.execute(count_sql)
                    poll.execute(dead_sql)
                    quiet = self.settle(prod, [poll])
                    others = self.other_sessions()
                    before = DbStats.read(self.admin, self.opts.dbname)
                    poll_cpu0 = proc_cpu_seconds(poll_pid)
                    window = self.cpu_window([worker, prod], [poll_pid])
                    t0 = time.perf_counter()
                    worker.send("GO")
                    prod.send(
                        json.dumps(
                            {
                                "cmd": "soak",
                                "start": 0,
                                "seconds": o.soak_seconds,
                                "rate": o.soak_rate,
                                "batch": o.soak_batch,
                            }
                        )
                    )
                    series: list[tuple[float, int, int | None, int, int]] = []
                    polls = 0
                    k = 1
                    while True:
                        wait = t0 + k * o.soak_poll - time.perf_counter()
                        k += 1
                        try:
                            reply = prod.expect_json(timeout=max(0.0, wait))
                            break
                        except TimeoutError:
                            pass
                        row = poll.execute(count_sql).fetchone()
                        dead = poll.execute(dead_sql).fetchone()
                        polls += 2
                        now = time.perf_counter() - t0
                        assert row is not None
                        assert dead is not None
                        flight = int(row[1]) if len(row) > 1 else None
                        series.append((round(now, 2), int(row[0]), flight, *map(int, dead)))
                        if now > 2 * o.soak_seconds + 600:
                            raise TimeoutError(f"the producer is still running after {now:.0f} s")
                    row = poll.execute(count_sql).fetchone()
                    polls += 1
                    end_s = time.perf_counter() - t0
                    cpu = window()
                    cpu["poll_pg_cpu_s"] = proc_cpu_seconds(poll_pid) - poll_cpu0
                    assert row is not None
                    completed = int(row[0])
                    in_flight_end = int(row[1]) if len(row) > 1 else None
                worker.send("STOP")
                report = worker.expect_json(timeout=120)
            finally:
                prod.close()
                if worker is not None:
                    worker.close()
            wait_for_no_backends(self.admin, self.opts.dbname)
            delta = DbStats.read(self.admin, self.opts.dbname).delta(self.admin, before)
            states = self.state_counts()
            tables = self.table_stats()
        delta["harness_polls"] = polls
        delta["xact_commit"] -= polls
        produced = int(reply["inserted"])
        done, pending = self.adapter.completed_state(), self.adapter.pending_state()
        # Stopped with a backlog: jobs are completed or still pending, nothing else.
        ok = (
            set(states) <= {done, pending}
            and sum(states.values()) == produced
            and states.get(done, 0) == report["handled"]
        )
        half = next(((t, c) for t, c, *_ in series if t >= end_s / 2), None)
        second_half_rate = (
            (completed - half[1]) / (end_s - half[0]) if half and end_s > half[0] else math.nan
        )
        flights = [f for _, _, f, _, _ in series if f is not None]
        return {
            "rate": completed / end_s,
            "elapsed_s": end_s,
            "offered_rate": o.soak_rate,
            "soak_seconds": o.soak_seconds,
            "batch": o.soak_batch,
            "concurrency": o.soak_concurrency,
            "produced": produced,
            # on schedule the last batch goes out one interval before the end
            "produced_rate": produced / max(float(reply["elapsed"]), o.soak_seconds),
            "producer": {k: v for k, v in reply.items() if k != "ok"},
            "completed": completed,
            "kept_pct": 100.0 * completed / produced if produced else math.nan,
            "second_half_rate": second_half_rate,
            "backlog_end": produced - completed,
            "in_flight_end": in_flight_end,
            "max_in_flight": max(flights) if flights else None,
            "autovacuum": autovacuum,
            "quiet_pct": quiet,
            "other_sessions": others,
            "delta": delta,
            "cpu": cpu,
            **self.per_job(delta, max(produced, 1), cpu),
            "series": series,
            "tables": tables,
            "worker": {k: v for k, v in report.items() if k != "latencies"},
            "states": states,
            "verified": ok,
        }

    # -- driver -----------------------------------------------------------------------

    def plan(self) -> list[list[tuple[str, Callable[[], dict[str, Any]]]]]:
        """Groups of (workload key, run function) for every selected workload.

        The workloads of one group are compared with each other (drain and drain1m
        at one concurrency, cpu2 with one and with several processes), so their runs
        alternate: run 1 of each, then run 2 of each, and so on.
        """
        only, adapter = self.opts.only, self.adapter
        groups: list[list[tuple[str, Callable[[], dict[str, Any]]]]] = []
        if "insert" in only:
            groups.append([("insert", lambda: self.run_insert("insert"))])
        if "batch" in only:
            groups.append([("batch", lambda: self.run_insert("batch"))])
        if "concurrent" in only and adapter.concurrent_skip is not None:
            self.skipped["concurrent"] = adapter.concurrent_skip
        elif "concurrent" in only:
            p = self.opts.producers
            group = [(f"concurrent_p{p}", lambda: self.run_insert("concurrent"))]
            if adapter.supports_group_commit:
                group.append(
                    (
                        f"concurrent_gc_p{p}",
                        lambda: self.run_insert("concurrent", group_commit=True),
                    )
                )
            groups.append(group)
        drain1m = "drain1m" in only and adapter.terminal_fill_skip is None
        if "drain1m" in only and not drain1m:
            self.skipped["drain1m"] = str(adapter.terminal_fill_skip)
        if "drain1m" in only and "drain" not in only and drain1m:
            log(f"{adapter.name}: drain1m runs next to the plain drain, which is added")
        if "drain" in only or drain1m:
            for c in self.opts.concurrency:
                group: list[tuple[str, Callable[[], dict[str, Any]]]] = [
                    (f"drain_c{c}", lambda c=c: self.run_drain(c))
                ]
                if drain1m:
                    group.append(
                        (
                            f"drain1m_c{c}",
                            lambda c=c: self.run_drain(c, terminal_rows=self.opts.terminal_rows),
                        )
                    )
                groups.append(group)
        if "followups" in only and adapter.supports_followups:
            groups.extend(
                [(f"followups_c{c}", lambda c=c: self.run_drain(c, followups=True))]
                for c in self.opts.concurrency
            )
        if "latency" in only:
            groups.append([("latency", self.run_latency)])
        if "soak" in only:
            groups.append([("soak", self.run_soak)])
        if "cpu2" in only and not adapter.supports_cpu_handler:
            self.skipped["cpu2"] = "wai's multi-process worker only (no CPU handler for peers)"
        elif "cpu2" in only:
            procs = self.opts.cpu2_processes
            if (os.cpu_count() or 1) < procs:
                log(f"cpu2: only {os.cpu_count()} core(s) for {procs} worker processes")
            handlers = ["async", "sync"] if self.opts.cpu2_handler == "both" else []
            for handler in handlers or [self.opts.cpu2_handler]:
                prefix = "cpu2" if handler == "async" else "cpu2sync"
                groups.append(
                    [
                        (
                            f"{prefix}_p{p}",
                            lambda p=p, h=handler: self.run_drain(
                                self.opts.cpu2_concurrency,
                                processes=p,
                                cpu_ms=self.opts.cpu_ms,
                                sync_handler=h == "sync",
                            ),
                        )
                        for p in (1, procs)
                    ]
                )
        return groups

    def run_one(self, key: str, fn: Callable[[], dict[str, Any]], i: int) -> dict[str, Any]:
        """Run ``i`` of workload ``key``; a failure is recorded, not fatal.

        A run during which other processes used more than ``--noisy-pct`` % of a core
        is repeated up to ``--retries`` times (a soak run never is); the least
        disturbed attempt is kept (the choice looks only at the disturbance, never at
        the result) and the others are stored under ``noisy_attempts``.
        """
        retries = 0 if key == "soak" else self.opts.retries
        attempts: list[dict[str, Any]] = []
        for attempt in range(retries + 1):
            t = time.perf_counter()
            try:
                res = fn()
            except Exception as exc:
                traceback.print_exc()
                res = {"error": f"{type(exc).__name__}: {exc}", "verified": False}
            res["run"] = i
            res["noisy"] = other_pct(res) > self.opts.noisy_pct
            attempts.append(res)
            took = time.perf_counter() - t
            retry = res["noisy"] and attempt < retries
            again = " (noisy, again)" if retry else ""
            log(f"{self.adapter.name} {key} run {i}: {brief(res)} ({took:.1f} s){again}")
            if "error" in res or not res["noisy"]:
                break
        best = min(attempts, key=lambda r: ("error" in r, other_pct(r)))
        others = [r for r in attempts if r is not best]
        if others:
            best["noisy_attempts"] = others
        return best


def run_in_turns(benches: list[Bench]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every selected workload of every library; results by library, then workload key.

    Workload after workload (in the order the plans name them), run ``i`` of a workload
    (its whole group, see :meth:`Bench.plan`) runs for each library in turn before run
    ``i + 1`` of any: the runs that are compared are taken close together in time.
    """
    plans = {b.adapter.name: b.plan() for b in benches}
    # A group is known by its first workload: a library that has fewer variants of it
    # (no drain1m, no group commit) takes its turns in the same rounds as the others.
    order: list[str] = []
    for groups in plans.values():
        for group in groups:
            if group[0][0] not in order:
                order.append(group[0][0])
    results: dict[str, dict[str, list[dict[str, Any]]]] = {b.adapter.name: {} for b in benches}
    for first in order:
        for i in range(1, benches[0].opts.runs + 1):
            for bench in benches:
                name = bench.adapter.name
                for group in plans[name]:
                    if group[0][0] != first:
                        continue
                    for key, fn in group:
                        results[name].setdefault(key, []).append(bench.run_one(key, fn, i))
    return results


def other_pct(res: dict[str, Any]) -> float:
    """CPU % of one core used by other processes during a run (0 if unknown)."""
    cpu = res.get("cpu")
    return float(cpu["other_cpu_pct"]) if isinstance(cpu, dict) else 0.0


# -- reporting --------------------------------------------------------------------------


def log(msg: str) -> None:
    """Progress to stderr, so stdout holds only the report."""
    print(msg, file=sys.stderr, flush=True)


def brief(res: dict[str, Any]) -> str:
    """One-line summary of a run."""
    if "error" in res:
        return f"FAILED {res['error']}"
    flag = "" if res.get("verified") else " NOT VERIFIED"
    if "rate" in res:
        return (
            f"{res['rate']:,.0f} jobs/s, {res['xacts_per_job']:.3f} xacts/job, "
            f"pg {res['pg_cpu_ms_per_job']:.3f} ms/job, client {res['client_cpu_ms_per_job']:.3f}"
            f" ms/job, quiet {res['quiet_pct']:.0f}%, other {res['cpu']['other_cpu_pct']:.0f}%"
            + (f", peak in flight {res['max_in_flight']}" if res.get("max_in_flight") else "")
            + (f", backlog at the end {res['backlog_end']:,}" if "backlog_end" in res else "")
            + (f", {res['fill']['rows']:,} terminal rows stored" if "fill" in res else "")
            + flag
        )
    return (
        f"p50 {res['p50_ms']:.1f} p95 {res['p95_ms']:.1f} p99 {res['p99_ms']:.1f} "
        f"max {res['max_ms']:.1f} ms{flag}"
    )


def fmt(values: list[float], digits: int = 0, thousands: bool = True) -> str:
    """``median (min-max)`` of the per-run values."""
    s = summarize(values)
    if math.isnan(s["median"]):
        return "-"
    spec = f"{',' if thousands else ''}.{digits}f"
    med, lo, hi = (format(s[k], spec) for k in ("median", "min", "max"))
    if len(values) == 1:
        return med
    return f"{med} ({lo}-{hi})"


def med(values: list[float], digits: int) -> str:
    """The median alone."""
    s = summarize(values)
    return "-" if math.isnan(s["median"]) else format(s["median"], f",.{digits}f")


def peak(runs: list[dict[str, Any]]) -> str:
    """Peak in-flight jobs of each drain run ("-" for other workloads)."""
    values = [r.get("max_in_flight") for r in runs]
    return ", ".join(str(v) for v in values if v is not None) or "-"


def good(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs that finished (verified or not)."""
    return [r for r in runs if "error" not in r]


def label_of(key: str, runs: list[dict[str, Any]] | None = None) -> str:
    """The report's name of a workload key."""
    fixed = {"insert": "single insert", "batch": "batch insert"}
    if key in fixed:
        return fixed[key]
    if key == "soak":
        r = next(iter(good(runs or [])), None)
        offered = f" (offered {r['offered_rate']:,.0f}/s)" if r else ""
        return f"soak completed{offered}"
    if key.startswith("concurrent_gc_p"):
        return f"concurrent insert, {key.removeprefix('concurrent_gc_p')} tasks, group commit"
    if key.startswith("concurrent_p"):
        return f"concurrent insert, {key.removeprefix('concurrent_p')} tasks"
    if key.startswith("drain1m_c"):
        r = next((r for r in good(runs or []) if "fill" in r), None)
        rows = f"{r['fill']['rows']:,}" if r else "stored"
        return f"drain over {rows} terminal rows c={key.removeprefix('drain1m_c')}"
    if key.startswith(("cpu2_p", "cpu2sync_p")):
        kind, _, procs = key.partition("_p")
        r = next(iter(good(runs or [])), None)
        cpu = f"{r['cpu_ms']:g} ms" if r else "CPU"
        handler = "sync" if kind == "cpu2sync" else "async"
        slots = f" x {r['concurrency']} slots" if r else ""
        noun = "process" if procs == "1" else "processes"
        return f"cpu2: {cpu} {handler} handlers, {procs} {noun}{slots}"
    return key.replace("drain_c", "drain c=").replace(
        "followups_c", "drain with 1 follow-up per job (both counted) c="
    )


#: (workload key prefix, base key prefix, label, target) of the ratios in the report.
RATIOS = (
    ("followups_c", "drain_c", "follow-up drain / plain drain", "≥ 0.8"),
    ("drain1m_c", "drain_c", "drain over stored terminal rows / plain drain", "≥ 0.90"),
)


def ratio_lines(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """``| ratio ... |`` rows: follow-up and drain1m drains to the plain drain, cpu2."""

    def rate(runs: list[dict[str, Any]] | None) -> float:
        ok = good(runs or [])
        return statistics.median(r["rate"] for r in ok) if ok else math.nan

    lines: list[str] = []
    for key, runs in results.items():
        for prefix, base, label, target in RATIOS:
            if key.startswith(prefix):
                c = key.removeprefix(prefix)
                ratio = rate(runs) / rate(results.get(base + c))
                if not math.isnan(ratio):
                    lines.append(f"| ratio {label}, c={c} | {ratio:.2f} (target {target}) | | |")
        if key.startswith(("cpu2_p", "cpu2sync_p")) and not key.endswith("_p1"):
            one = key[: key.rindex("_p")] + "_p1"
            ratio = rate(runs) / rate(results.get(one))
            if not math.isnan(ratio):
                procs = key[key.rindex("_p") + 2 :]
                lines.append(
                    f"| ratio {label_of(key, runs).partition(',')[0]}: {procs} processes / 1 "
                    f"| {ratio:.2f} (target ≥ 1.6) | | |"
                )
    return lines


def mib(n: float) -> str:
    """Bytes as MiB with one decimal."""
    return f"{n / 1048576:,.1f}"


def table_lines(stats: dict[str, Any], *, top_indexes: int = 12) -> list[str]:
    """Markdown tables of :meth:`Bench.table_stats` (tables with any rows or activity)."""
    lines = [
        "| table | live rows | dead rows | table MiB | indexes MiB | total MiB "
        "| ins / upd (HOT) / del | vacuums / autovacuums |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in stats["tables"]:
        if not (t["live"] or t["dead"] or t["ins"] or t["upd"] or t["del"]):
            continue
        lines.append(
            f"| {t['table']} | {t['live']:,} | {t['dead']:,} | {mib(t['table_bytes'])} "
            f"| {mib(t['index_bytes'])} | {mib(t['total_bytes'])} "
            f"| {t['ins']:,} / {t['upd']:,} ({t['hot_upd']:,}) / {t['del']:,} "
            f"| {t['vacuums']} / {t['autovacuums']} |"
        )
    indexes = [i for i in stats["indexes"] if i["bytes"] > 8192][:top_indexes]
    if indexes:
        lines.append("")
        lines.append("| index (larger than one page) | table | MiB | scans |")
        lines.append("|---|---|---|---|")
        lines.extend(
            f"| {i['index']} | {i['table']} | {mib(i['bytes'])} | {i['scans']:,} |" for i in indexes
        )
    return lines


def soak_section(runs: list[dict[str, Any]]) -> list[str]:
    """The soak's own figures: throughput kept, backlog, dead tuples and sizes."""
    ok = good(runs)
    if not ok:
        return []
    r0 = ok[-1]
    lines = [
        "",
        f"**soak**: {r0['offered_rate']:,.0f} jobs/s offered in batches of {r0['batch']} for "
        f"{r0['soak_seconds']:g} s, one worker with {r0['concurrency']} slots; "
        f"server autovacuum = **{r0['autovacuum']}** (not changed by the bench). "
        "Medians (min-max) of the runs:",
        "",
        "| soak figure | value |",
        "|---|---|",
        f"| produced jobs/s | {fmt([r['produced_rate'] for r in ok], 1)} |",
        f"| completed jobs/s (whole soak) | {fmt([r['rate'] for r in ok], 1)} |",
        f"| completed jobs/s (second half) | {fmt([r['second_half_rate'] for r in ok], 1)} |",
        f"| throughput kept (completed / produced) % | {fmt([r['kept_pct'] for r in ok], 2)} |",
        f"| backlog at the end (produced - completed) | {fmt([r['backlog_end'] for r in ok])} |",
        f"| producer batches later than one interval | "
        f"{fmt([r['producer']['late_batches'] for r in ok])} |",
        "| CPU ms per job produced: worker / producer / pg "
        f"| {med([1000 * r['cpu']['clients_cpu_s'][0] / r['produced'] for r in ok], 3)} / "
        f"{med([1000 * r['cpu']['clients_cpu_s'][1] / r['produced'] for r in ok], 3)} / "
        f"{med([r['pg_cpu_ms_per_job'] for r in ok], 3)} |",
        "| dead tuples at the end (library tables) "
        f"| {fmt([sum(t['dead'] for t in r['tables']['tables']) for r in ok])} |",
        "| total size MiB at the end (library tables) "
        f"| {fmt([sum(t['total_bytes'] for t in r['tables']['tables']) / 1048576 for r in ok], 1)}"
        " |",
        "",
        f"Tables and indexes at the end of run {r0['run']} (after the worker stopped and every "
        "session closed, so all statistics are flushed):",
        "",
    ]
    lines.extend(table_lines(r0["tables"]))
    return lines


def fill_section(results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """What drain1m stored, and its tables after the drain."""
    lines: list[str] = []
    for key, runs in results.items():
        r = next((r for r in good(runs) if "fill" in r), None)
        if r is None:
            continue
        f = r["fill"]
        lines.append("")
        lines.append(
            f"**{key}** (run {r['run']}): {f['rows']:,} finished jobs stored in "
            f"{f['fill_s']:.1f} s, VACUUM ANALYZE {f['vacuum_s']:.1f} s, CHECKPOINT "
            f"{f['checkpoint_s']:.1f} s; the library's tables after the drain:"
        )
        lines.append("")
        lines.extend(table_lines(r["tables_after"], top_indexes=8))
    return lines


def report(
    name: str,
    env: dict[str, Any],
    results: dict[str, list[dict[str, Any]]],
    skipped: dict[str, str] | None = None,
) -> str:
    """Markdown tables of one adapter's results."""
    lines: list[str] = []
    if not results:
        lines.append(f"### {name}: nothing run\n")
        lines.extend(f"- {key} skipped: {why}" for key, why in (skipped or {}).items())
        return "\n".join(lines)
    lines.append(f"### {name} {env.get('version', '?')}\n")
    drivers = env.get("drivers")
    if drivers is None:  # a producer that predates the drivers field
        drivers = {"psycopg": env.get("psycopg")}
    driver_text = ", ".join(f"{d} {v}" for d, v in drivers.items()) or "no Python driver"
    lines.append(
        f"imported from `{env.get('origin')}`; Python {env.get('python')}, {driver_text}\n"
    )
    lines.append("| workload | result: median (min-max) | runs ok | noisy runs kept |")
    lines.append("|---|---|---|---|")
    for key, runs in results.items():
        ok = good(runs)
        verified = sum(1 for r in runs if r.get("verified"))
        noisy = sum(1 for r in runs if r.get("noisy"))
        if key == "latency":
            lines.extend(
                f"| pickup latency {p} ms | {fmt([r[f'{p}_ms'] for r in ok], 1)} "
                f"| {verified}/{len(runs)} | {noisy} |"
                for p in ("p50", "p95", "p99", "max")
            )
        else:
            lines.append(
                f"| {label_of(key, runs)} jobs/s | {fmt([r['rate'] for r in ok])} "
                f"| {verified}/{len(runs)} | {noisy} |"
            )
    lines.extend(ratio_lines(results))
    for key, why in (skipped or {}).items():
        lines.append(f"| {key} | skipped: {why} | | |")
    lines.append("")
    lines.append(
        "| workload | xacts/job | rows ins / upd / del per job | WAL B/job "
        "| CPU ms/job client / pg | CPU % client / pg / machine | other CPU % | quiet % "
        "| peak in flight |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for key, runs in results.items():
        ok = good(runs)
        if not ok or key == "latency":
            continue

        def col(k: str, ok: list[dict[str, Any]] = ok) -> list[float]:
            return [r[k] for r in ok]

        def cpu(k: str, ok: list[dict[str, Any]] = ok) -> list[float]:
            return [r["cpu"][k] for r in ok]

        lines.append(
            f"| {key} | {med(col('xacts_per_job'), 3)} "
            f"| {med(col('ins_per_job'), 2)} / {med(col('upd_per_job'), 2)} / "
            f"{med(col('del_per_job'), 2)} | {med(col('wal_bytes_per_job'), 0)} "
            f"| {med(col('client_cpu_ms_per_job'), 3)} / {med(col('pg_cpu_ms_per_job'), 3)} "
            f"| {med(cpu('client_cpu_pct'), 0)} / {med(cpu('pg_cpu_pct'), 0)} / "
            f"{med(cpu('machine_cpu_pct'), 0)} | {med(cpu('other_cpu_pct'), 1)} "
            f"| {med(col('quiet_pct'), 1)} | {peak(ok)} |"
        )
    lines.append("")
    lines.append(
        "client = the producer child for insert/batch, the worker child(ren) for drains "
        "(summed over cpu2's processes), worker + producer for soak (per job produced). "
        "Medians of the runs. xacts exclude the harness's polls; WAL is cluster-wide. "
        f"CPU % is of one core ({os.cpu_count()} cores in all). pg = postmaster, "
        "auxiliary processes and the backends of the bench database; other = machine "
        "total minus client, pg and harness. Peak in flight: the most jobs seen claimed "
        "but not yet completed at one poll, per run."
    )
    lines.extend(soak_section(results.get("soak", [])))
    lines.extend(fill_section(results))
    failed = [(k, r) for k, runs in results.items() for r in runs if not r.get("verified")]
    for key, r in failed:
        what = r.get("error") or f"states {r.get('states')}, worker {r.get('worker')}"
        lines.append(f"\n**{key} run {r['run']} failed verification**: {what}")
    return "\n".join(lines)


def compared_figures(keys: list[str]) -> list[tuple[str, str, str, bool]]:
    """(label, workload key, result attr, higher is better) of every compared figure."""
    figures: list[tuple[str, str, str, bool]] = []
    for key in keys:
        if key == "insert":
            figures.append(("single insert jobs/s", key, "rate", True))
        elif key == "batch":
            figures.append(("batch insert jobs/s", key, "rate", True))
        elif key.startswith("concurrent_p"):
            p = key.removeprefix("concurrent_p")
            figures.append((f"concurrent insert {p} tasks jobs/s", key, "rate", True))
        elif key.startswith("concurrent_gc_p"):
            p = key.removeprefix("concurrent_gc_p")
            label = f"concurrent insert {p} tasks jobs/s, wai group commit (peers: as above)"
            figures.append((label, key, "rate", True))
        elif key.startswith("drain_c"):
            figures.append((f"drain c={key.removeprefix('drain_c')} jobs/s", key, "rate", True))
        elif key.startswith("drain1m_c"):
            c = key.removeprefix("drain1m_c")
            figures.append((f"drain over terminal rows c={c} jobs/s", key, "rate", True))
        elif key == "soak":
            figures.append(("soak completed jobs/s", key, "rate", True))
            figures.append(("soak backlog at the end", key, "backlog_end", False))
        elif key == "latency":
            figures.extend(
                (f"pickup latency {p} ms", key, f"{p}_ms", False) for p in ("p50", "p95", "p99")
            )
    return figures


def figure_median(runs: list[dict[str, Any]], attr: str) -> tuple[float, bool]:
    """Median of ``attr`` over the finished runs, and whether every run verified."""
    values = [float(r[attr]) for r in good(runs) if attr in r]
    median = statistics.median(values) if values else math.nan
    return median, bool(runs) and all(r.get("verified") for r in runs)


def comparison(results: dict[str, dict[str, list[dict[str, Any]]]], base: str = "wai") -> str:
    """Medians side by side, and the ratio ``base / peer`` of every figure.

    Figures from runs that failed or did not verify are marked with ``*``.
    """
    names = list(results)
    keys: list[str] = []
    for per_adapter in results.values():
        keys.extend(k for k in per_adapter if k not in keys)
    figures = compared_figures(keys)
    medians: dict[tuple[str, str], tuple[float, bool]] = {}
    for name in names:
        for _, key, attr, _ in figures:
            # a library without group commit is compared with its one concurrent run
            own = key if key in results[name] else key.replace("concurrent_gc_p", "concurrent_p")
            if own in results[name]:
                medians[name, f"{key}:{attr}"] = figure_median(results[name][own], attr)

    def cell(name: str, key: str, attr: str, digits: int) -> str:
        value, ok = medians.get((name, f"{key}:{attr}"), (math.nan, True))
        if math.isnan(value):
            return "-"
        return format(value, f",.{digits}f") + ("" if ok else "*")

    lines = ["### Side by side (medians)", ""]
    lines.append("| figure | " + " | ".join(names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for label, key, attr, higher in figures:
        digits = 0 if higher else 1
        cells = " | ".join(cell(n, key, attr, digits) for n in names)
        lines.append(f"| {label} | {cells} |")
    peers = [n for n in names if n != base]
    if base not in results or not peers:
        lines.append("")
        lines.append("`*` = some run of this figure failed or did not verify.")
        return "\n".join(lines)
    lines.append("")
    lines.append(f"### {base} / peer (ratio of the medians)")
    lines.append("")
    lines.append(
        f"Every cell is {base}'s median divided by the peer's. For jobs/s higher is better, "
        f"so above 1 means {base} is faster; for latency lower is better, so **below 1** "
        f"means {base} is faster (its pickup latency is that fraction of the peer's)."
    )
    lines.append("")
    lines.append(
        f"| figure | {base} ahead when | " + " | ".join(f"{base} / {p}" for p in peers) + " |"
    )
    lines.append("|---|---|" + "---|" * len(peers))
    for label, key, attr, higher in figures:
        mine, mine_ok = medians.get((base, f"{key}:{attr}"), (math.nan, True))
        cells = []
        for peer in peers:
            theirs, theirs_ok = medians.get((peer, f"{key}:{attr}"), (math.nan, True))
            if math.isnan(mine) or math.isnan(theirs) or theirs == 0:
                cells.append("-")
                continue
            flag = "" if mine_ok and theirs_ok else "*"
            cells.append(f"{mine / theirs:.2f}{flag}")
        when = "> 1 (higher is better)" if higher else "< 1 (lower is better)"
        lines.append(f"| {label} | {when} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("`*` = some run of this figure failed or did not verify.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the report."""
    opts = parse_args(argv)
    started = time.time()
    admin_url = db_url(opts.server_url, "postgres")
    meta: dict[str, Any] = {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "options": asdict(opts),
        "machine": machine_info(),
        "source": source_info(),
        "harness_python": platform.python_version(),
        "psycopg": psycopg.__version__,
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(started)),
    }
    all_results: dict[str, Any] = {}
    sections: list[str] = []
    exit_code = 0
    adapters = [load_adapter(name) for name in opts.adapters]
    try:  # find every interpreter before the first run, not after wai's
        interpreters = {a.name: a.python(opts.python) for a in adapters}
    except FileNotFoundError as exc:
        raise SystemExit(str(exc)) from None
    for name, path in interpreters.items():
        if not Path(path).exists():
            raise SystemExit(f"interpreter for adapter {name!r} not found: {path}")
    meta["interpreters"] = interpreters
    with psycopg.connect(admin_url, autocommit=True) as admin:
        meta["server"] = server_info(admin)
        log(f"server: {meta['server']['version']}")
        log(f"settings: {meta['server']['settings']}")
        benches = [Bench(opts, adapter, admin) for adapter in adapters]
        by_name: dict[str, dict[str, list[dict[str, Any]]]] = {}
        try:
            if opts.sequential:
                for bench in benches:
                    log(f"== {bench.adapter.name} ({bench.python}) ==")
                    by_name.update(run_in_turns([bench]))
            else:
                log("== " + ", ".join(f"{b.adapter.name} ({b.python})" for b in benches) + " ==")
                by_name = run_in_turns(benches)
        finally:
            drop_database(admin_url, opts.dbname)
        for bench in benches:
            name = bench.adapter.name
            results = by_name.get(name, {})
            all_results[name] = {
                "env": bench.env_info,
                "results": results,
                "skipped": bench.skipped,
            }
            sections.append(report(name, bench.env_info, results, bench.skipped))
            if any(not r.get("verified") for runs in results.values() for r in runs):
                exit_code = 1
    meta["elapsed_s"] = round(time.time() - started, 1)
    meta["source_after"] = source_info()
    m = meta["machine"]
    s = meta["server"]["settings"]
    print(
        f"machine: {m['nproc']} x {m['cpu_model']}, {m['ram_gib']} GiB RAM; "
        f"PostgreSQL {s.get('server_version')}, synchronous_commit={s.get('synchronous_commit')}, "
        f"fsync={s.get('fsync')}, shared_buffers={s.get('shared_buffers')}, "
        f"autovacuum={s.get('autovacuum')}; "
        f"{opts.runs} run(s) per workload, {opts.jobs:,} jobs; took {meta['elapsed_s']} s"
    )
    src0, src1 = meta["source"], meta["source_after"]
    print(
        f"project tree: HEAD {src0['git_head']}, "
        f"{src0['src_uncommitted_files']} uncommitted file(s)"
        f" under src/, sources sha256 {src0['src_sha256']}"
        + ("" if src0 == src1 else f" -> {src1['src_sha256']} (CHANGED DURING THE RUN)")
    )
    if opts.session_options:
        print(f"**diagnostic run: library sessions use options {opts.session_options!r}**")
    print()
    print("\n\n".join(sections))
    if len(all_results) > 1:
        print()
        print(comparison({n: r["results"] for n, r in all_results.items()}))
    if opts.json_path:
        Path(opts.json_path).parent.mkdir(parents=True, exist_ok=True)
        with open(opts.json_path, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "adapters": all_results}, f, indent=1)
        log(f"raw results written to {opts.json_path}")
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
