"""Sustained throughput: a queue fed at a fixed rate for many minutes, with autovacuum at work.

Usage::

    .venv/bin/python bench/sustained.py [--adapter wai|pgqueuer] [--minutes 30] [--rate N]
        [--hold-snapshot-at 300 --hold-snapshot-for 600] [--out DIR] [--png PATH]

Unless ``--database-url`` is given, it starts a throwaway PostgreSQL cluster (``cluster.py``:
``initdb``, the server's default settings, so autovacuum on with its default thresholds,
fsync and synchronous_commit on) and removes it afterwards, also after an error or Ctrl-C.

1. **Rate.** Without ``--rate``, two probes on the same server (each on its own scratch
   database, with ``run.py``'s workloads): a drain of ``--probe-drain`` (20,000) batch-inserted
   jobs by one worker with ``--concurrency`` slots, and ``--probe-inserts`` (5,000) single
   inserts by one producer. The rate is ``--rate-fraction`` (0.6) of the lower of the two:
   the producer inserts one job per transaction, which costs several times what draining
   one costs, so on a small machine the drain alone would ask for a rate the producer
   cannot offer. With ``--tick S`` the producer inserts, every ``S`` s, the jobs due by
   then in one batch call (``insert_many``; pgqueuer's list ``enqueue``), and the rate is
   that share of the drain probe alone: the issue's 60 % of the maximum drain.
2. **The run.** On a fresh scratch database, one producer process inserts single jobs on a
   fixed schedule (job ``i`` due at ``epoch + i / rate``; a late producer catches up
   back-to-back and reports its lag, and stops at the end whatever is still due) for
   ``--minutes``, while one worker process with
   ``--concurrency`` slots works them off. Each job carries ``t = time.time()`` taken just
   before its insert; the handler's ``time.time() - t`` at its start is the job's
   **pickup** time.

   - wai: every ``--chain-every`` (5th) job is a ``Chained`` job whose completion enqueues
     one ``Done`` follow-up in the same transaction (``on_completed_enqueue``); the worker
     runs with ``completed_retention = --retention`` (60 s), so the leader's retention
     cleanup deletes completed jobs (``cleanup_interval``: wai's default unless
     ``--cleanup-interval``; ``reindex_interval`` likewise with ``--reindex-interval``).
     Everything else is wai's default.
   - pgqueuer: no follow-ups (it has none) and no retention setting: a finished job is
     deleted from ``pgqueuer`` when it finishes and leaves three rows in ``pgqueuer_log``
     (``queued``, ``picked``, ``successful``), which pgqueuer never deletes; its log
     aggregation (every 30 s) flags them ``aggregated``.
3. **The snapshot.** With ``--hold-snapshot-at S`` (and/or ``--hold-snapshot-for D``;
   defaults 300 and 600 when only one is given), at ``S`` s a separate connection opens a
   ``REPEATABLE READ`` transaction, reads one row of the queue table, and commits ``D`` s
   later: the reporting query or forgotten ``BEGIN`` that stops vacuum.

Every ``--window`` (10) s one row of the series: the producer's and the worker's counts
for that window (from their own processes, ``windows.py``), and a sample of the server at
its end (the adapter's tables in ``pg_stat_user_tables``, the oldest snapshot in
``pg_stat_activity``). The backlog is counted from the children's counts (jobs inserted less
jobs started), not by the server: a ``count(*)`` of the waiting jobs every window reads the
same dead index entries a held snapshot keeps as the claim does, and would weigh on the
phase it measures. Windows are labelled with a phase: ``warm-up`` (the first
``--warmup`` s), ``clean``, ``held snapshot``, ``after``. The output: ``series.csv`` and
``series.json`` (with the probes, settings and summary) in ``--out``, the summary table on
stdout, a PNG (``--png``, default ``OUT/sustained.png``; needs matplotlib, the ``bench``
extra). The columns are described in ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import json
import math
import shlex
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run as bench_run  # noqa: E402
from adapter import Adapter, load_adapter  # noqa: E402
from cluster import cluster  # noqa: E402
from harness import Child, db_url, machine_busy_seconds, wait_for_no_backends  # noqa: E402

PHASES = ("warm-up", "clean", "held snapshot", "after")
#: The columns of ``series.csv``, in order (described in bench/README.md).
COLUMNS = (
    "window", "start_s", "end_s", "phase", "snapshot_held",
    "inserted_per_s", "completed_per_s", "followups_per_s", "producer_lag_max_s",
    "insert_ms_p50", "insert_ms_p99", "backlog",
    "pickups", "pickup_p50_ms", "pickup_p99_ms", "pickup_max_ms",
    "insert_part_p99_ms", "wait_part_p99_ms", "start_part_p99_ms",
    "worker_loop_lag_max_ms", "worker_loop_stalls", "worker_gc_full", "worker_gc_full_max_ms",
    "table_bytes", "index_bytes", "total_bytes", "live_tup", "dead_tup",
    "ins_per_s", "upd_per_s", "del_per_s",
    "autovacuum", "autoanalyze", "autovacuum_queue", "autovacuumed",
    "xmin_age", "snapshot_age_s", "machine_cpu_pct",
)  # fmt: skip

TABLES_SQL = """
SELECT schemaname || '.' || relname, n_live_tup, n_dead_tup,
       pg_total_relation_size(relid), pg_indexes_size(relid),
       n_tup_ins, n_tup_upd, n_tup_del, autovacuum_count, autoanalyze_count
FROM pg_stat_user_tables WHERE {where}
"""
# the oldest snapshot another session holds: its xmin's age in transactions and how long
# its transaction has been open
SNAPSHOT_SQL = """
SELECT coalesce(max(age(backend_xmin)), 0),
       coalesce(extract(epoch FROM max(now() - xact_start)), 0)::float8
FROM pg_stat_activity WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
"""


def log(msg: str) -> None:
    """A progress line on stderr."""
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--adapter", choices=("wai", "pgqueuer"), default="wai")
    p.add_argument(
        "--database-url",
        help="an existing server (its database part is ignored); default: a throwaway cluster",
    )
    p.add_argument("--dbname", default="wai_sustained", help="scratch database of the run")
    p.add_argument("--minutes", type=float, default=30.0, help="producer run time")
    p.add_argument("--rate", type=float, help="jobs/s offered; default: measured (see above)")
    p.add_argument("--rate-fraction", type=float, default=0.6, help="share of the probed rate")
    p.add_argument("--probe-drain", type=int, default=20_000, help="jobs of the drain probe")
    p.add_argument("--probe-inserts", type=int, default=5_000, help="single inserts probed")
    p.add_argument(
        "--tick",
        type=float,
        default=0.0,
        help="seconds; > 0: the producer inserts the jobs due every tick in one batch call, "
        "and the rate is a share of the drain probe alone",
    )
    p.add_argument("--concurrency", type=int, default=32, help="worker slots")
    p.add_argument("--window", type=float, default=10.0, help="seconds per row of the series")
    p.add_argument("--warmup", type=float, default=60.0, help="seconds labelled warm-up")
    p.add_argument("--hold-snapshot-at", type=float, help="seconds; default 300 with -for")
    p.add_argument("--hold-snapshot-for", type=float, help="seconds; default 600 with -at")
    p.add_argument("--retention", type=float, default=60.0, help="wai: completed_retention (s)")
    p.add_argument("--cleanup-interval", type=float, help="wai: cleanup_interval (s)")
    p.add_argument(
        "--reindex-interval",
        type=float,
        help="wai: reindex_interval (s); a huge value measures the runtime without rebuilds",
    )
    p.add_argument("--chain-every", type=int, default=5, help="wai: every Nth job chains one")
    p.add_argument("--out", help="output directory (default bench/out/sustained-ADAPTER)")
    p.add_argument("--png", help="chart path (default OUT/sustained.png)")
    p.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="interpreter of an adapter (as in run.py)",
    )
    a = p.parse_args(argv)
    if a.hold_snapshot_at is not None or a.hold_snapshot_for is not None:
        a.hold_snapshot_at = 300.0 if a.hold_snapshot_at is None else a.hold_snapshot_at
        a.hold_snapshot_for = 600.0 if a.hold_snapshot_for is None else a.hold_snapshot_for
    if a.minutes <= 0 or a.window <= 0 or a.concurrency < 1 or (a.rate is not None and a.rate <= 0):
        p.error("--minutes, --window, --concurrency and --rate must be positive")
    if a.adapter != "wai":
        a.chain_every = 0
    a.out = Path(a.out or HERE / "out" / f"sustained-{a.adapter}")
    a.png = Path(a.png) if a.png else a.out / "sustained.png"
    return a


def run_options(a: argparse.Namespace, server: str, dbname: str, jobs: int) -> bench_run.Options:
    """``run.py``'s options for the probes and the children of the run."""
    argv = ["--database-url", server, "--dbname", dbname, "--jobs", str(jobs)]
    argv += ["--adapters", a.adapter, "--quiet-wait", "0", "--concurrency", str(a.concurrency)]
    for item in a.python:
        argv += ["--python", item]
    return bench_run.parse_args(argv)


def probe(a: argparse.Namespace, server: str, admin: psycopg.Connection[Any]) -> dict[str, Any]:
    """The drain and single-insert probes; the rate is a share of the lower."""
    adapter = load_adapter(a.adapter)
    opts = run_options(a, server, f"{a.dbname}_probe", a.probe_drain)
    drain = bench_run.Bench(opts, adapter, admin).run_drain(a.concurrency)
    log(f"probe: drain of {a.probe_drain:,} jobs at {drain['rate']:,.0f} jobs/s")
    opts = dataclasses.replace(opts, jobs=a.probe_inserts)
    insert = bench_run.Bench(opts, adapter, admin).run_insert("insert")
    log(f"probe: {a.probe_inserts:,} single inserts at {insert['rate']:,.0f} jobs/s")
    if not (drain["verified"] and insert["verified"]):
        raise SystemExit("a probe did not verify")
    # batches: the drain alone bounds the rate the producer can offer
    lower = drain["rate"] if a.tick > 0 else min(drain["rate"], insert["rate"])
    return {
        "drain_rate": drain["rate"],
        "drain_jobs": a.probe_drain,
        "insert_rate": insert["rate"],
        "insert_jobs": a.probe_inserts,
        "limited_by": "drain"
        if a.tick > 0 or drain["rate"] <= insert["rate"]
        else "single inserts",
        "rate": a.rate_fraction * lower,
    }


# -- sampling the server ------------------------------------------------------------------


@dataclasses.dataclass(slots=True)
class Sample:
    """The server at one moment: the adapter's tables, the oldest snapshot."""

    at: float
    tables: dict[str, tuple[int, ...]]
    xmin_age: int
    snapshot_age_s: float
    machine_busy_s: float

    @classmethod
    def read(cls, conn: psycopg.Connection[Any], adapter: Adapter, at: float) -> Sample:
        """Read it on ``conn`` (autocommit: every statement sees fresh statistics)."""
        where = adapter.table_filter_sql()
        tables = {
            str(r[0]): tuple(int(v) for v in r[1:])
            for r in conn.execute(TABLES_SQL.format(where=where))
        }
        snap = conn.execute(SNAPSHOT_SQL).fetchone()
        assert snap is not None
        busy, _ = machine_busy_seconds()
        return cls(at, tables, int(snap[0]), float(snap[1]), busy)

    def total(self, i: int, names: tuple[str, ...] | None = None) -> int:
        """Column ``i`` of the tables (all, or ``names``), summed."""
        return sum(v[i] for n, v in self.tables.items() if names is None or n in names)


# columns of Sample.tables
LIVE, DEAD, TOTAL, INDEXES, INS, UPD, DEL, AUTOVAC, AUTOANALYZE = range(9)


def row_of(
    k: int,
    a: argparse.Namespace,
    prev: Sample,
    cur: Sample,
    held: bool,
    queue_tables: tuple[str, ...],
) -> dict[str, Any]:
    """The server's half of window ``k``'s row (the children's half is merged later)."""
    w = cur.at - prev.at

    def delta(i: int, names: tuple[str, ...] | None = None) -> int:
        return cur.total(i, names) - prev.total(i, names)

    vacuumed = [
        n.split(".")[-1]
        for n, v in sorted(cur.tables.items())
        if v[AUTOVAC] > prev.tables.get(n, v)[AUTOVAC]
    ]
    start = k * a.window
    return {
        "window": k,
        "start_s": start,
        "end_s": start + a.window,
        "phase": phase_of(start + a.window / 2, a),
        "snapshot_held": int(held),
        "table_bytes": cur.total(TOTAL) - cur.total(INDEXES),
        "index_bytes": cur.total(INDEXES),
        "total_bytes": cur.total(TOTAL),
        "live_tup": cur.total(LIVE),
        "dead_tup": cur.total(DEAD),
        "ins_per_s": delta(INS) / w,
        "upd_per_s": delta(UPD) / w,
        "del_per_s": delta(DEL) / w,
        "autovacuum": delta(AUTOVAC),
        "autoanalyze": delta(AUTOANALYZE),
        "autovacuum_queue": delta(AUTOVAC, queue_tables),
        "autovacuumed": ";".join(vacuumed),
        "xmin_age": cur.xmin_age,
        "snapshot_age_s": round(cur.snapshot_age_s, 1),
        "machine_cpu_pct": round(100 * (cur.machine_busy_s - prev.machine_busy_s) / w, 1),
    }


def phase_of(t: float, a: argparse.Namespace) -> str:
    """The phase that second ``t`` of the run belongs to."""
    if t < a.warmup:
        return "warm-up"
    if a.hold_snapshot_at is not None:
        if a.hold_snapshot_at <= t < a.hold_snapshot_at + a.hold_snapshot_for:
            return "held snapshot"
        if t >= a.hold_snapshot_at + a.hold_snapshot_for:
            return "after"
    return "clean"


def backlog(prod_w: dict[int, dict[str, Any]], work_w: dict[int, dict[str, Any]], upto: int) -> int:
    """The producer's jobs inserted but not yet started at the end of window ``upto``.

    Counted from the children's window counts (``inserted`` less ``handled``), follow-ups
    left out; a job claimed but not yet started counts as waiting. A job can start before
    its producer's insert call has returned and been counted, so the difference is held at
    zero or above.
    """
    ins = sum(w.get("counts", {}).get("inserted", 0) for k, w in prod_w.items() if k <= upto)
    done = sum(w.get("counts", {}).get("handled", 0) for k, w in work_w.items() if k <= upto)
    return max(0, ins - done)


def merge_child(row: dict[str, Any], prod: dict[str, Any], work: dict[str, Any], w: float) -> None:
    """Add the producer's and the worker's counts of the window to ``row``."""
    pc, wc = prod.get("counts", {}), work.get("counts", {})
    ins = prod.get("samples", {}).get("insert_ms")
    pick = work.get("samples", {}).get("pickup_ms")
    row["inserted_per_s"] = pc.get("inserted", 0) / w
    row["completed_per_s"] = wc.get("handled", 0) / w
    row["followups_per_s"] = wc.get("followups", 0) / w
    row["producer_lag_max_s"] = prod.get("maxima", {}).get("lag_s", math.nan)
    row["insert_ms_p50"], row["insert_ms_p99"] = (ins[0], ins[1]) if ins else (math.nan,) * 2
    row["pickups"] = pick[3] if pick else 0
    row["pickup_p50_ms"], row["pickup_p99_ms"], row["pickup_max_ms"] = (
        tuple(pick[:3]) if pick else (math.nan,) * 3
    )
    wm = work.get("maxima", {})
    row["worker_loop_lag_max_ms"] = wm.get("loop_lag_ms", math.nan)
    row["worker_loop_stalls"] = wc.get("loop_stalls", 0)
    row["worker_gc_full"] = wc.get("gc_full", 0)
    row["worker_gc_full_max_ms"] = wm.get("gc_full_ms", math.nan)
    for part in ("insert", "wait", "start"):
        got = work.get("samples", {}).get(f"{part}_part_ms")
        row[f"{part}_part_p99_ms"] = got[1] if got else math.nan


def take_lines(
    child: Child, windows: dict[int, dict[str, Any]], finals: list[dict[str, Any]]
) -> None:
    """Everything the child has written so far: window lines, or its final answer.

    The final answer is the last line a child writes; reading stops there, so that a child
    which has already exited after it (its end of file waiting behind the line) is not
    taken for one that died.
    """
    while True:
        try:
            line = child.expect(timeout=0)
        except TimeoutError:
            return
        obj = json.loads(line)
        if isinstance(obj, dict) and "window" in obj:
            windows[int(obj["window"])] = obj
        else:
            finals.append(obj)
            return


def wait_final(child: Child, windows: dict[int, dict[str, Any]], timeout: float) -> dict[str, Any]:
    """Collect window lines until the child's final answer comes."""
    deadline = time.monotonic() + timeout
    finals: list[dict[str, Any]] = []
    while not finals:
        take_lines(child, windows, finals)
        if time.monotonic() > deadline:
            raise TimeoutError("a child gave no final answer")
        time.sleep(0.05)
    return finals[0]


class Snapshot:
    """The held snapshot: ``REPEATABLE READ``, one row read, kept open, then committed."""

    def __init__(self, url: str, table: str) -> None:
        self.conn = psycopg.connect(url)
        self.conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        self.table = table
        self.held = False

    def hold(self) -> None:
        """Open the transaction and take its snapshot."""
        self.conn.execute(f"SELECT * FROM {self.table} LIMIT 1")
        self.held = True

    def release(self) -> None:
        """Commit."""
        self.conn.commit()
        self.held = False

    def close(self) -> None:
        """Roll back if still open and disconnect."""
        self.conn.close()


@contextlib.contextmanager
def server(a: argparse.Namespace) -> Iterator[str]:
    """The given server, or a throwaway cluster with default settings."""
    if a.database_url:
        yield a.database_url
        return
    with cluster(prefix="wai-sustained-") as url:
        log(f"throwaway cluster at {url}")
        yield url


def sustain(
    a: argparse.Namespace, srv: str, admin: psycopg.Connection[Any], rate: float
) -> dict[str, Any]:
    """The run itself: producer, worker, snapshot, one row per window."""
    adapter = load_adapter(a.adapter)
    bench = bench_run.Bench(run_options(a, srv, a.dbname, 1), adapter, admin)
    n = math.ceil(a.minutes * 60 / a.window)
    seconds = n * a.window
    queue_tables = adapter.queue_tables()
    rows: list[dict[str, Any]] = []
    prod_w: dict[int, dict[str, Any]] = {}
    work_w: dict[int, dict[str, Any]] = {}
    hold_at = a.hold_snapshot_at
    hold_end = None if hold_at is None else hold_at + a.hold_snapshot_for
    held_span: list[float] = []
    with bench.database():
        prod = bench.producer()
        worker: Child | None = None
        snap: Snapshot | None = None
        try:
            epoch = time.time() + 3.0
            options = ["--window-epoch", repr(epoch), "--window-seconds", repr(a.window)]
            if a.adapter == "wai":
                options += ["--completed-retention", repr(a.retention)]
                if a.cleanup_interval is not None:
                    options += ["--cleanup-interval", repr(a.cleanup_interval)]
                if a.reindex_interval is not None:
                    options += ["--reindex-interval", repr(a.reindex_interval)]
            worker = bench.worker(a.concurrency, options=options)
            url = db_url(srv, a.dbname)
            snap = Snapshot(url, queue_tables[0]) if hold_at is not None else None
            with psycopg.connect(url, autocommit=True) as conn:
                time.sleep(max(0.0, epoch - time.time()))
                worker.send("GO")
                prod.send(json.dumps({
                    "cmd": "sustained", "start": 0, "seconds": seconds, "rate": rate,
                    "epoch": epoch, "window": a.window, "chain_every": a.chain_every,
                    "tick": a.tick,
                }))  # fmt: skip
                prev = Sample.read(conn, adapter, 0.0)
                finals: list[dict[str, Any]] = []
                for k in range(n):
                    tick = epoch + (k + 1) * a.window
                    held_in_window = snap is not None and snap.held
                    while (now := time.time()) < tick:
                        t = now - epoch
                        if snap is not None and hold_at is not None and hold_end is not None:
                            if not snap.held and not held_span and t >= hold_at:
                                snap.hold()
                                held_span.append(time.time() - epoch)
                                log(f"{t:7.1f} s snapshot held (REPEATABLE READ)")
                            elif snap.held and t >= hold_end:
                                snap.release()
                                held_span.append(time.time() - epoch)
                                log(f"{t:7.1f} s snapshot released")
                            held_in_window = held_in_window or snap.held
                        if not finals:
                            take_lines(prod, prod_w, finals)
                        take_lines(worker, work_w, [])
                        time.sleep(min(0.2, max(0.0, tick - time.time())))
                    cur = Sample.read(conn, adapter, time.time() - epoch)
                    row = row_of(k, a, prev, cur, held_in_window, queue_tables)
                    rows.append(row)
                    prev = cur
                    samples = work_w.get(k - 1, {}).get("samples", {})
                    wmax = work_w.get(k - 1, {}).get("maxima", {})
                    last = samples.get("pickup_ms")
                    parts = "/".join(
                        f"{samples[f'{n}_part_ms'][1]:.1f}"
                        for n in ("insert", "wait", "start")
                        if f"{n}_part_ms" in samples
                    )
                    done = work_w.get(k - 1, {}).get("counts", {}).get("handled", 0)
                    log(
                        f"{row['end_s']:7.0f} s {row['phase']:<13}"
                        f"  (window before: backlog {backlog(prod_w, work_w, k - 1):>7,}"
                        f" completed/s {done / a.window:>6,.0f}"
                        f" pickup p99 {last[1] if last else math.nan:7.1f} ms"
                        + (f" = insert/wait/start {parts}" if parts else "")
                        + f"; worker loop lag max {wmax.get('loop_lag_ms', math.nan):.1f} ms"
                        + f", full gc max {wmax.get('gc_full_ms', 0.0):.1f} ms)"
                        f"  size {row['total_bytes'] / 2**20:7.1f} MiB"
                        f"  dead {row['dead_tup']:>9,}  autovacuum {row['autovacuumed'] or '-'}"
                        f"  xmin age {row['xmin_age']:,}"
                    )
                time.sleep(0.5)
                take_lines(worker, work_w, [])
                worker.send("STOP")
                work_final = wait_final(worker, work_w, 120)
                prod_final = finals[0] if finals else wait_final(prod, prod_w, 120)
        finally:
            if snap is not None:
                snap.close()
            prod.close()
            if worker is not None:
                worker.close()
        wait_for_no_backends(admin, a.dbname)
        tables = bench.table_stats()
    for row in rows:
        k = int(row["window"])
        merge_child(row, prod_w.get(k, {}), work_w.get(k, {}), a.window)
        row["backlog"] = backlog(prod_w, work_w, k)
    return {
        "rows": rows,
        "held_span_s": held_span,
        "producer": prod_final,
        "worker": work_final,
        "tables_end": tables,
        "env": bench.env_info,
    }


# -- summary ---------------------------------------------------------------------------------


def slope_mib_per_min(rows: list[dict[str, Any]]) -> float:
    """Least-squares slope of ``total_bytes`` over ``end_s``, in MiB per minute."""
    if len(rows) < 2:
        return math.nan
    xs = [float(r["end_s"]) / 60 for r in rows]
    ys = [float(r["total_bytes"]) / 2**20 for r in rows]
    return statistics.linear_regression(xs, ys).slope


def _nanmax(values: list[float]) -> float:
    clean = [v for v in values if not math.isnan(v)]
    return max(clean) if clean else math.nan


def summarize(rows: list[dict[str, Any]], minutes: float) -> dict[str, Any]:
    """Per phase figures and the plateau check."""
    phases: list[dict[str, Any]] = []
    for name in PHASES:
        rs = [r for r in rows if r["phase"] == name]
        if not rs:
            continue
        first = rows.index(rs[0])
        before = rows[first - 1]["total_bytes"] if first > 0 else math.nan
        inserted = statistics.fmean(r["inserted_per_s"] for r in rs)
        completed = statistics.fmean(r["completed_per_s"] for r in rs)
        p50s = [r["pickup_p50_ms"] for r in rs if not math.isnan(r["pickup_p50_ms"])]
        phases.append(
            {
                "phase": name,
                "from_s": rs[0]["start_s"],
                "to_s": rs[-1]["end_s"],
                "inserted_per_s": inserted,
                "completed_per_s": completed,
                "followups_per_s": statistics.fmean(r["followups_per_s"] for r in rs),
                "kept_pct": 100 * completed / inserted if inserted else math.nan,
                "pickup_p50_ms": statistics.median(p50s) if p50s else math.nan,
                "worst_p99_ms": _nanmax([r["pickup_p99_ms"] for r in rs]),
                "max_ms": _nanmax([r["pickup_max_ms"] for r in rs]),
                "backlog_end": rs[-1]["backlog"],
                "backlog_max": max(r["backlog"] for r in rs),
                "bytes_start": before,
                "bytes_end": rs[-1]["total_bytes"],
                "slope_mib_per_min": slope_mib_per_min(rs),
                "dead_max": max(r["dead_tup"] for r in rs),
                "autovacuum_queue": sum(r["autovacuum_queue"] for r in rs),
                "lag_max_s": _nanmax([r["producer_lag_max_s"] for r in rs]),
                "machine_cpu_pct": statistics.fmean(r["machine_cpu_pct"] for r in rs),
            }
        )
    span_s = min(20 * 60.0, 2 / 3 * minutes * 60)
    end = rows[-1]["end_s"] if rows else 0
    tail = [r for r in rows if r["end_s"] > end - span_s]
    slope = slope_mib_per_min(tail)
    start_mib = tail[0]["total_bytes"] / 2**20 if tail else math.nan
    growth = slope * span_s / 60
    return {
        "phases": phases,
        "plateau": {
            "span_s": span_s,
            "slope_mib_per_min": slope,
            "start_mib": start_mib,
            "end_mib": tail[-1]["total_bytes"] / 2**20 if tail else math.nan,
            "fitted_growth_pct": 100 * growth / start_mib if start_mib else math.nan,
            # flat: the fitted line moves by less than 10 % of the size where it starts;
            # growing: it rises by 10 % or more (the upward trend the target rules out; a
            # size that falls, as after vacuum hands a table's empty end back, is neither)
            "flat": bool(start_mib and abs(growth) < 0.1 * start_mib),
            "growing": bool(start_mib and growth >= 0.1 * start_mib),
        },
    }


def mib(b: float) -> str:
    """Bytes as MiB, one decimal."""
    return "-" if math.isnan(b) else f"{b / 2**20:,.1f}"


def ms(v: float) -> str:
    """Milliseconds, three significant figures."""
    return "-" if math.isnan(v) else f"{v:,.3g}" if v < 100 else f"{v:,.0f}"


def report(summary: dict[str, Any]) -> str:
    """The summary as markdown tables."""
    lines = [
        "| phase | seconds | inserted/s | completed/s (+ follow-ups/s) | kept | pickup p50 ms "
        "| worst-window p99 ms | max ms | backlog end (max) | MiB start → end | MiB/min "
        "| dead tuples max | autovacuums of the queue tables | producer lag max s "
        "| machine CPU % of a core |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines.extend(
        f"| {p['phase']} | {p['from_s']:.0f}-{p['to_s']:.0f} | {p['inserted_per_s']:,.0f} "
        f"| {p['completed_per_s']:,.0f} (+ {p['followups_per_s']:,.0f}) "
        f"| {p['kept_pct']:.1f} % | {ms(p['pickup_p50_ms'])} | {ms(p['worst_p99_ms'])} "
        f"| {ms(p['max_ms'])} | {p['backlog_end']:,} ({p['backlog_max']:,}) "
        f"| {mib(p['bytes_start'])} → {mib(p['bytes_end'])} "
        f"| {p['slope_mib_per_min']:+.2f} | {p['dead_max']:,} | {p['autovacuum_queue']} "
        f"| {p['lag_max_s']:.2f} | {p['machine_cpu_pct']:.0f} |"
        for p in summary["phases"]
    )
    pl = summary["plateau"]
    lines += [
        "",
        f"plateau check over the last {pl['span_s'] / 60:.1f} min: size {pl['start_mib']:,.1f} → "
        f"{pl['end_mib']:,.1f} MiB, fitted slope {pl['slope_mib_per_min']:+.2f} MiB/min "
        f"({pl['fitted_growth_pct']:+.1f} % over the span): "
        + (
            "**flat** (< 10 %)"
            if pl["flat"]
            else "**still growing** (≥ 10 %)"
            if pl.get("growing", True)
            else "**shrinking**, no upward trend (≤ -10 %)"
        ),
    ]
    return "\n".join(lines)


def write_series(out: Path, rows: list[dict[str, Any]], doc: dict[str, Any]) -> None:
    """``series.csv`` (one row per window) and ``series.json`` (everything)."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "series.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for r in rows:
            writer.writerow(
                {c: ("" if isinstance(r[c], float) and math.isnan(r[c]) else r[c]) for c in COLUMNS}
            )
    with (out / "series.json").open("w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, default=str)


def plot(path: Path, rows: list[dict[str, Any]], doc: dict[str, Any]) -> bool:
    """The chart; False (and a note) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("no PNG: matplotlib is not installed (pip install -e '.[bench]')")
        return False
    x = [r["end_s"] / 60 for r in rows]
    fig, axes = plt.subplots(4, 1, figsize=(11, 12), sharex=True)
    a0, a1, a2, a3 = axes
    a0.plot(x, [r["inserted_per_s"] for r in rows], label="inserted/s")
    a0.plot(x, [r["completed_per_s"] for r in rows], label="completed/s")
    if any(r["followups_per_s"] for r in rows):
        a0.plot(x, [r["followups_per_s"] for r in rows], label="follow-ups/s", ls="--")
    a0.set_ylabel("jobs/s")
    a1.plot(x, [r["pickup_p50_ms"] for r in rows], label="pickup p50")
    a1.plot(x, [r["pickup_p99_ms"] for r in rows], label="pickup p99")
    a1.plot(x, [r["pickup_max_ms"] for r in rows], label="pickup max", lw=0.6, alpha=0.6)
    a1.set_yscale("log")
    a1.set_ylabel("ms")
    a2.plot(x, [r["total_bytes"] / 2**20 for r in rows], label="table + indexes")
    a2.plot(x, [r["table_bytes"] / 2**20 for r in rows], label="table")
    a2.plot(x, [r["index_bytes"] / 2**20 for r in rows], label="indexes")
    a2.set_ylabel("MiB")
    a3.plot(x, [r["dead_tup"] for r in rows], label="n_dead_tup")
    a3.plot(x, [r["live_tup"] for r in rows], label="n_live_tup", lw=0.8)
    a3.set_ylabel("tuples")
    a3.set_xlabel("minutes")
    span = doc["run"]["held_span_s"]
    vacuums = [r["end_s"] / 60 for r in rows if r["autovacuum_queue"]]
    for ax in axes:
        if len(span) >= 1:
            end = span[1] if len(span) > 1 else rows[-1]["end_s"]
            ax.axvspan(span[0] / 60, end / 60, color="orange", alpha=0.15)
        for i, v in enumerate(vacuums):
            ax.axvline(v, color="grey", lw=0.6, ls=":", label="autovacuum" if i == 0 else None)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    m = doc["meta"]
    held = " · shaded: snapshot held" if span else ""
    fig.suptitle(
        f"{m['adapter']}: {m['rate']:,.0f} jobs/s offered for {m['minutes']:g} min, "
        f"{m['concurrency']} slots · dotted: autovacuum of {', '.join(m['queue_tables'])}{held}",
        fontsize=10,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    """Probe, run, summarise, write."""
    a = parse_args(argv)
    adapter = load_adapter(a.adapter)
    started = time.time()
    with server(a) as srv, psycopg.connect(db_url(srv, "postgres"), autocommit=True) as admin:
        info = bench_run.server_info(admin)
        log(f"server: {info['version']}; {info['settings']}")
        probed = None if a.rate is not None else probe(a, srv, admin)
        rate = a.rate if probed is None else probed["rate"]
        log(f"rate: {rate:,.0f} jobs/s for {a.minutes:g} min")
        run = sustain(a, srv, admin, rate)
    rows = run.pop("rows")
    summary = summarize(rows, a.minutes)
    meta = {
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "adapter": a.adapter,
        "rate": rate,
        "probe": probed,
        "minutes": a.minutes,
        "concurrency": a.concurrency,
        "window": a.window,
        "warmup": a.warmup,
        "hold_snapshot": [a.hold_snapshot_at, a.hold_snapshot_for],
        "retention": a.retention if a.adapter == "wai" else None,
        "cleanup_interval": a.cleanup_interval,
        "reindex_interval": a.reindex_interval,
        "chain_every": a.chain_every,
        "queue_tables": adapter.queue_tables(),
        "server": info,
        "throwaway_cluster": a.database_url is None,
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(started)),
        "elapsed_s": round(time.time() - started, 1),
        "source": bench_run.source_info(),
    }
    doc = {"meta": meta, "summary": summary, "run": run, "series": rows}
    write_series(a.out, rows, doc)
    drawn = plot(a.png, rows, doc)
    where = "a throwaway cluster" if a.database_url is None else "the given server"
    probe_text = (
        ""
        if probed is None
        else f" ({a.rate_fraction:.0%} of the lower probe: drain {probed['drain_rate']:,.0f}, "
        f"single inserts {probed['insert_rate']:,.0f} jobs/s)"
    )
    s = info["settings"]
    print(
        f"{a.adapter} ({run['env'].get('version', '?')}) on {where}: PostgreSQL "
        f"{s.get('server_version')}, autovacuum={s.get('autovacuum')}, fsync={s.get('fsync')}, "
        f"synchronous_commit={s.get('synchronous_commit')}; {rate:,.0f} jobs/s offered"
        f"{probe_text} for {a.minutes:g} min, {a.concurrency} slots"
        + (f", every {a.chain_every}th job with a follow-up" if a.chain_every else "")
        + (f", completed_retention {a.retention:g} s" if a.adapter == "wai" else "")
        + (
            f"; snapshot held {a.hold_snapshot_at:g}-{a.hold_snapshot_at + a.hold_snapshot_for:g} s"
            if a.hold_snapshot_at is not None
            else ""
        )
    )
    prod = run["producer"]
    print(
        f"producer: {prod.get('inserted', 0):,} jobs inserted of "
        f"{prod.get('inserted', 0) + prod.get('behind_at_end', 0):,} due "
        f"({prod.get('behind_at_end', 0):,} still due at the end), largest lag "
        f"{prod.get('max_lag_s', math.nan):.2f} s; "
        f"worker handled {run['worker'].get('handled', 0):,}"
    )
    print()
    print(report(summary))
    print()
    print(f"series: {a.out / 'series.csv'}, {a.out / 'series.json'}")
    if drawn:
        print(f"chart: {a.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
