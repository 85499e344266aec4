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
    percentile,
    proc_cpu_seconds,
    quiet_gate,
    summarize,
    wait_for_no_backends,
)

WORKLOADS = ("insert", "batch", "drain", "followups", "latency")
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
    p.add_argument("--only", default=",".join(WORKLOADS), help="workloads to run")
    p.add_argument("--concurrency", default="32,128", help="worker slots for the drain runs")
    p.add_argument("--latency-jobs", type=int, default=200)
    p.add_argument("--latency-interval", type=float, default=0.02, help="seconds between inserts")
    p.add_argument("--latency-slots", type=int, default=32)
    p.add_argument("--idle", type=float, default=2.0, help="worker idle time before latency")
    p.add_argument("--poll-interval", type=float, default=0.05, help="drain completion poll (s)")
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

    def worker(self, concurrency: int, *, followups: bool = False) -> Child:
        """Start the worker child and wait for READY (connected, nothing started)."""
        child = Child(
            [
                self.python,
                str(BENCH_DIR / f"{self.adapter.worker_module}.py"),
                "--url",
                self.child_url,
                "--concurrency",
                str(concurrency),
                *(["--followups"] if followups else []),
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

    def cpu_window(self, client: Child, exclude: list[int]) -> Callable[[], dict[str, float]]:
        """Start a CPU measurement; the returned function ends it and gives the figures.

        ``exclude``: backend pids of the harness itself (the drain poll).
        """
        me = os.getpid()
        c0 = client.cpu_seconds()
        pg0 = self.pg_cpu.ours(self.admin, self.opts.dbname, exclude)
        srv0 = self.pg_cpu.server()
        own0 = proc_cpu_seconds(me)
        m0, t0 = machine_busy_seconds()

        def stop() -> dict[str, float]:
            m1, t1 = machine_busy_seconds()
            c1 = client.cpu_seconds()
            pg1 = self.pg_cpu.ours(self.admin, self.opts.dbname, exclude)
            srv1 = self.pg_cpu.server()
            own1 = proc_cpu_seconds(me)
            wall = t1 - t0
            client_s, own_s, machine_s = c1 - c0, own1 - own0, m1 - m0
            pg_s = self.pg_cpu.between(pg0, pg1)
            server_s = srv1 - srv0
            return {
                "wall_s": wall,
                "client_cpu_s": client_s,
                "pg_cpu_s": pg_s,
                "pg_server_cpu_s": server_s,
                "harness_cpu_s": own_s,
                "client_cpu_pct": 100 * client_s / wall,
                "pg_cpu_pct": 100 * pg_s / wall,
                "machine_cpu_pct": 100 * machine_s / wall,
                "other_cpu_pct": 100 * (machine_s - client_s - pg_s - own_s) / wall,
            }

        return stop

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

    def run_insert(self, mode: str) -> dict[str, Any]:
        """One single-insert (``mode="insert"``) or batch-insert (``"batch"``) run."""
        n = self.opts.jobs
        cmd: dict[str, Any] = {"cmd": "insert_single", "start": 0, "count": n}
        if mode == "batch":
            cmd = {"cmd": "insert_batch", "start": 0, "count": n, "chunk": self.opts.chunk}
        with self.database():
            prod = self.producer()
            try:
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

    def run_drain(self, concurrency: int, *, followups: bool = False) -> dict[str, Any]:
        """One drain run with ``concurrency`` slots in one worker process.

        With ``followups`` every job enqueues one follow-up job with its completion
        (wai only): the run ends when triggers and follow-ups, 2 x ``--jobs``, are done.
        """
        prefilled = self.opts.jobs
        n = prefilled * 2 if followups else prefilled
        with self.database():
            prod = self.producer()
            try:
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
            worker = self.worker(concurrency, followups=followups)
            try:
                with psycopg.connect(self.url, autocommit=True) as poll:
                    row = poll.execute("SELECT pg_backend_pid()").fetchone()
                    assert row is not None
                    poll_pid = int(row[0])
                    count_sql = self.adapter.count_completed_sql()
                    poll.execute(count_sql)  # plan it once, outside the measurement
                    quiet = self.settle(None, [poll])
                    others = self.other_sessions()
                    before = DbStats.read(self.admin, self.opts.dbname)
                    poll_cpu0 = proc_cpu_seconds(poll_pid)
                    window = self.cpu_window(worker, [poll_pid])
                    t0 = time.perf_counter()
                    worker.send("GO")
                    progress, polls, elapsed = self._poll_until(poll, count_sql, n, t0)
                    cpu = window()
                    cpu["poll_pg_cpu_s"] = proc_cpu_seconds(poll_pid) - poll_cpu0
                worker.send("STOP")
                report = worker.expect_json(timeout=120)
            finally:
                worker.close()
            wait_for_no_backends(self.admin, self.opts.dbname)
            delta = DbStats.read(self.admin, self.opts.dbname).delta(self.admin, before)
            states = self.state_counts()
        delta["harness_polls"] = polls
        delta["xact_commit"] -= polls  # our own polling transactions
        done = self.adapter.completed_state()
        ok = states == {done: n} and report["handled"] == n
        first = next((t for t, c, _ in progress if c > 0), math.nan)
        flights = [f for _, _, f in progress if f is not None]
        return {
            "concurrency": concurrency,
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
            "worker": {k: v for k, v in report.items() if k != "latencies"},
            "states": states,
            "verified": ok,
        }

    def _poll_until(
        self, poll: psycopg.Connection[Any], count_sql: str, target: int, t0: float
    ) -> tuple[list[tuple[float, int, int | None]], int, float]:
        """Poll the completed count on a fixed cadence until it reaches ``target``.

        Returns the (seconds, completed, in flight) series, the number of polls and
        the time of the poll that saw ``target``.
        """
        interval = self.opts.poll_interval
        progress: list[tuple[float, int, int | None]] = []
        polls = 0
        timeout = max(300.0, target / 50)
        k = 1
        while True:
            delay = t0 + k * interval - time.perf_counter()
            k += 1
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

    # -- driver -----------------------------------------------------------------------

    def plan(self) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
        """(workload key, run function) for every selected workload."""
        steps: list[tuple[str, Callable[[], dict[str, Any]]]] = []
        if "insert" in self.opts.only:
            steps.append(("insert", lambda: self.run_insert("insert")))
        if "batch" in self.opts.only:
            steps.append(("batch", lambda: self.run_insert("batch")))
        if "drain" in self.opts.only:
            steps.extend(
                (f"drain_c{c}", lambda c=c: self.run_drain(c)) for c in self.opts.concurrency
            )
        if "followups" in self.opts.only and self.adapter.supports_followups:
            steps.extend(
                (f"followups_c{c}", lambda c=c: self.run_drain(c, followups=True))
                for c in self.opts.concurrency
            )
        if "latency" in self.opts.only:
            steps.append(("latency", self.run_latency))
        return steps

    def run_all(self) -> dict[str, list[dict[str, Any]]]:
        """Every selected workload, ``--runs`` times each; failures are recorded, not fatal.

        A run during which other processes used more than ``--noisy-pct`` % of a core
        is repeated up to ``--retries`` times; the least disturbed attempt is kept
        (the choice looks only at the disturbance, never at the result) and the
        others are stored under ``noisy_attempts``.
        """
        results: dict[str, list[dict[str, Any]]] = {}
        for key, fn in self.plan():
            results[key] = []
            for i in range(1, self.opts.runs + 1):
                attempts: list[dict[str, Any]] = []
                for attempt in range(self.opts.retries + 1):
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
                    retry = res["noisy"] and attempt < self.opts.retries
                    again = " (noisy, again)" if retry else ""
                    log(f"{self.adapter.name} {key} run {i}: {brief(res)} ({took:.1f} s){again}")
                    if "error" in res or not res["noisy"]:
                        break
                best = min(attempts, key=lambda r: ("error" in r, other_pct(r)))
                others = [r for r in attempts if r is not best]
                if others:
                    best["noisy_attempts"] = others
                results[key].append(best)
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


def report(name: str, env: dict[str, Any], results: dict[str, list[dict[str, Any]]]) -> str:
    """Markdown tables of one adapter's results."""
    lines: list[str] = []
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
            label = {"insert": "single insert", "batch": "batch insert"}.get(
                key,
                key.replace("drain_c", "drain c=").replace(
                    "followups_c", "drain with 1 follow-up per job (both counted) c="
                ),
            )
            lines.append(
                f"| {label} jobs/s | {fmt([r['rate'] for r in ok])} | {verified}/{len(runs)} "
                f"| {noisy} |"
            )
    for key, runs in results.items():
        plain = results.get(key.replace("followups_c", "drain_c"))
        if key.startswith("followups_c") and plain and good(runs) and good(plain):
            ratio = statistics.median(r["rate"] for r in good(runs)) / statistics.median(
                r["rate"] for r in good(plain)
            )
            lines.append(
                f"| ratio follow-up drain / plain drain, c={key.removeprefix('followups_c')} "
                f"| {ratio:.2f} | | |"
            )
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
        "client = the producer child for insert/batch, the worker child for drains. "
        "Medians of the runs. xacts exclude the harness's polls; WAL is cluster-wide. "
        f"CPU % is of one core ({os.cpu_count()} cores in all). pg = postmaster, "
        "auxiliary processes and the backends of the bench database; other = machine "
        "total minus client, pg and harness. Peak in flight: the most jobs seen claimed "
        "but not yet completed at one poll, per run."
    )
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
        elif key.startswith("drain_c"):
            figures.append((f"drain c={key.removeprefix('drain_c')} jobs/s", key, "rate", True))
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
            if key in results[name]:
                medians[name, f"{key}:{attr}"] = figure_median(results[name][key], attr)

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
        for adapter in adapters:
            name = adapter.name
            bench = Bench(opts, adapter, admin)
            log(f"== {name} ({bench.python}) ==")
            try:
                results = bench.run_all()
            finally:
                drop_database(admin_url, opts.dbname)
            all_results[name] = {"env": bench.env_info, "results": results}
            sections.append(report(name, bench.env_info, results))
            if any(not r.get("verified") for runs in results.values() for r in runs):
                exit_code = 1
    meta["elapsed_s"] = round(time.time() - started, 1)
    meta["source_after"] = source_info()
    m = meta["machine"]
    s = meta["server"]["settings"]
    print(
        f"machine: {m['nproc']} x {m['cpu_model']}, {m['ram_gib']} GiB RAM; "
        f"PostgreSQL {s.get('server_version')}, synchronous_commit={s.get('synchronous_commit')}, "
        f"fsync={s.get('fsync')}, shared_buffers={s.get('shared_buffers')}; "
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
