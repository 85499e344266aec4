"""Where a workload's time goes: ``pg_stat_statements`` on the server, pyinstrument in wai.

Usage::

    .venv/bin/python bench/profile.py [--adapters wai,pgqueuer] [--only drain,followups]
        [--concurrency 128] [--jobs 20000] [--top 12] [--pyinstrument DIR] [-- RUN_OPTIONS]

``pg_stat_statements`` must be preloaded, which the shared server does not do, so this
script starts a throwaway PostgreSQL cluster of its own: ``initdb`` into a temporary
directory (as the ``postgres`` OS user when run as root), default settings except
``shared_preload_libraries = pg_stat_statements``, on a free port of 127.0.0.1. For each
adapter and workload it resets the statistics, runs ``bench/run.py --runs 1`` for that one
workload against the cluster, and prints the statements that took the most server time:
calls, rows per call, mean and total execution time, share of the total, shared buffers
dirtied and WAL bytes per call, one table per database that run.py created (one per
workload run, in the order of the runs it logs: ``drain1m`` alternates with the plain
drain). Setup statements (schema, prefill) are in the same tables; the statement column
names them, so they are easy to tell apart from the claim and finalize path. Options
after ``--`` go to run.py as they are (``-- --terminal-rows 400000``).

``--pyinstrument DIR`` also profiles wai's worker child between GO and STOP (the
``BENCH_PYINSTRUMENT`` variable of ``worker_wai.py``; needs ``pip install -e '.[bench]'``)
and leaves one text report per worker process in DIR.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from cluster import cluster  # noqa: E402

# Per database of the run (run.py creates one per workload run, so its OID orders them),
# leaving out what ran in the maintenance database (CREATE and DROP DATABASE).
TOP_STATEMENTS = """
SELECT dbid, calls, rows, total_exec_time, mean_exec_time, shared_blks_dirtied, wal_bytes,
       regexp_replace(query, '\\s+', ' ', 'g')
FROM pg_stat_statements
WHERE calls > 0 AND dbid <> (SELECT oid FROM pg_database WHERE datname = 'postgres')
ORDER BY dbid, total_exec_time DESC
"""


@contextlib.contextmanager
def profiled_cluster() -> Iterator[str]:
    """A private cluster with pg_stat_statements preloaded; yields its server URL."""
    settings = "shared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.max = 5000\n"
    with cluster(settings, prefix="wai-profile-") as url:
        with psycopg.connect(url + "/postgres", autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        yield url


def _short(text: str, width: int) -> str:
    """The start and the end of a statement: two that differ only in RETURNING differ here."""
    if len(text) <= width:
        return text
    tail = width // 3
    return text[: width - tail - 3] + " … " + text[-tail:]


def report(rows: list[tuple[Any, ...]], top: int) -> str:
    """The statements table, most server time first."""
    total = sum(r[2] for r in rows) or 1.0
    lines = [
        f"{'calls':>7} {'rows/call':>9} {'mean ms':>8} {'total ms':>9} {'share':>6} "
        f"{'dirtied/call':>12} {'WAL B/call':>10}  statement",
    ]
    for calls, nrows, total_ms, mean_ms, dirtied, wal, query in rows[:top]:
        lines.append(
            f"{calls:>7} {nrows / calls:>9.1f} {mean_ms:>8.3f} {total_ms:>9.1f} "
            f"{total_ms / total:>6.1%} {dirtied / calls:>12.1f} {int(wal) / calls:>10.0f}  "
            f"{_short(query, 120)}"
        )
    rest = rows[top:]
    if rest:
        lines.append(
            f"{sum(r[0] for r in rest):>7} {'':>9} {'':>8} {sum(r[2] for r in rest):>9.1f} "
            f"{sum(r[2] for r in rest) / total:>6.1%} {'':>12} {'':>10}  ({len(rest)} more)"
        )
    return "\n".join(lines)


def main() -> None:
    """Start the cluster, profile each adapter and workload, print the tables."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--adapters", default="wai", help="libraries, one after the other")
    p.add_argument("--only", default="drain,followups", help="workloads of bench/run.py")
    p.add_argument("--concurrency", default="128", help="drain slots (one value is clearest)")
    p.add_argument("--jobs", type=int, default=20_000)
    p.add_argument("--top", type=int, default=12, help="statements shown per run")
    p.add_argument("--pyinstrument", metavar="DIR", help="profile wai's worker into DIR")
    p.add_argument("run_args", nargs="*", help="after --: more options for run.py")
    opts = p.parse_args()
    env = dict(os.environ)
    if opts.pyinstrument:
        Path(opts.pyinstrument).mkdir(parents=True, exist_ok=True)
        env["BENCH_PYINSTRUMENT"] = str(Path(opts.pyinstrument).resolve())
    with profiled_cluster() as url:
        for adapter in opts.adapters.split(","):
            for workload in opts.only.split(","):
                with psycopg.connect(url + "/postgres", autocommit=True) as conn:
                    conn.execute("SELECT pg_stat_statements_reset()")
                started = time.perf_counter()
                cmd = [
                    sys.executable, str(HERE / "run.py"), "--database-url", url,
                    "--adapters", adapter, "--only", workload, "--runs", "1",
                    "--jobs", str(opts.jobs), "--concurrency", opts.concurrency,
                    "--quiet-wait", "0", *opts.run_args,
                ]  # fmt: skip
                out = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if out.returncode != 0:
                    print(out.stdout[-2000:], out.stderr[-2000:], sep="\n", file=sys.stderr)
                    raise SystemExit(f"run.py failed for {adapter} {workload}")
                with psycopg.connect(url + "/postgres", autocommit=True) as conn:
                    rows = conn.execute(TOP_STATEMENTS).fetchall()
                seconds = time.perf_counter() - started
                print(f"\n== {adapter} · {workload} · concurrency {opts.concurrency} "
                      f"· {opts.jobs} jobs · {seconds:.0f} s with setup ==")  # fmt: skip
                print("\n".join(ln for ln in out.stderr.splitlines() if " run " in ln))
                for dbid, group in itertools.groupby(rows, key=lambda r: r[0]):
                    print(f"-- database {dbid} (the runs above, in order)")
                    print(report([r[1:] for r in group], opts.top))


if __name__ == "__main__":
    main()
