"""Library-neutral measurement helpers for ``bench/run.py``.

Everything here runs in the orchestrating (parent) process and needs only the
standard library and psycopg: CPU accounting from ``/proc``, ``pg_stat_database``
and WAL snapshots, the quiet gate, percentiles and child-process plumbing.
"""

from __future__ import annotations

import json
import math
import os
import queue
import statistics
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

__all__ = [
    "Child",
    "DbStats",
    "PgCpu",
    "db_url",
    "drop_database",
    "fresh_database",
    "machine_busy_seconds",
    "percentile",
    "proc_cpu_seconds",
    "quiet_gate",
    "summarize",
    "wait_for_no_backends",
]

CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- URLs and the database lifecycle ----------------------------------------------------


def db_url(server_url: str, dbname: str) -> str:
    """``server_url`` with its database path replaced by ``dbname``."""
    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{dbname}", parts.query, parts.fragment))


def drop_database(admin_url: str, name: str) -> None:
    """``DROP DATABASE IF EXISTS name WITH (FORCE)``."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def fresh_database(admin_url: str, name: str) -> None:
    """Drop ``name`` if it exists, then create it empty."""
    drop_database(admin_url, name)
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def wait_for_no_backends(admin: psycopg.Connection[Any], dbname: str, timeout: float = 10) -> None:
    """Wait until no session is connected to ``dbname`` (their stats are then flushed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (dbname,)
        ).fetchone()
        if row is not None and row[0] == 0:
            break
        time.sleep(0.05)
    # A backend flushes its statistics while exiting; leave it a moment to finish.
    time.sleep(0.3)


# -- CPU accounting from /proc ----------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name, or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name is in parentheses and may itself contain spaces or parentheses.
    return text[text.rindex(")") + 2 :].split()


def proc_cpu_seconds(pid: int, *, children: bool = False) -> float:
    """utime+stime of process ``pid`` (all its threads), plus reaped children if asked."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / CLK_TCK


def _ppid(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[1]) if fields is not None else None


class PgCpu:
    """CPU time of one PostgreSQL server, read from ``/proc``.

    Two figures, because other users may share the server:

    * :meth:`ours`: the postmaster, the auxiliary processes (checkpointer, WAL
      writer, autovacuum ...) and the client backends connected to one database.
      A backend that exits mid-measurement loses its last slice, so measure while
      the sessions under test stay connected.
    * :meth:`server`: the postmaster and all its children, including the reaped
      ones (their time is in the postmaster's ``cutime``/``cstime``): complete,
      but it also counts every other database's sessions.
    """

    def __init__(self, postmaster_pid: int) -> None:
        self.postmaster_pid = postmaster_pid

    @classmethod
    def discover(cls, conn: psycopg.Connection[Any]) -> PgCpu:
        """Find the postmaster as the parent of this connection's backend."""
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        ppid = _ppid(int(row[0]))
        if ppid is None:
            raise RuntimeError(
                "cannot read /proc of the PostgreSQL backend: the server must run on this "
                "machine, visible to this process"
            )
        return cls(ppid)

    def ours(
        self, admin: psycopg.Connection[Any], dbname: str, exclude: Sequence[int] = ()
    ) -> dict[int, float]:
        """CPU seconds per pid: postmaster, auxiliary processes, ``dbname``'s backends."""
        admin.execute("SELECT pg_stat_clear_snapshot()")
        rows = admin.execute(
            "SELECT pid FROM pg_stat_activity"
            " WHERE (backend_type <> 'client backend' OR datname = %s) AND pid <> ALL(%s)",
            (dbname, list(exclude)),
        ).fetchall()
        pids = {self.postmaster_pid, *(int(r[0]) for r in rows)}
        return {pid: proc_cpu_seconds(pid) for pid in pids if _ppid(pid) is not None}

    @staticmethod
    def between(before: dict[int, float], after: dict[int, float]) -> float:
        """CPU seconds used between two :meth:`ours` snapshots (new pids count from 0)."""
        return sum(t - before.get(pid, 0.0) for pid, t in after.items())

    def server(self) -> float:
        """Total CPU seconds so far of the postmaster and all its children, reaped included."""
        total = proc_cpu_seconds(self.postmaster_pid, children=True)
        for entry in os.scandir("/proc"):
            if entry.name.isdigit() and _ppid(int(entry.name)) == self.postmaster_pid:
                total += proc_cpu_seconds(int(entry.name))
        return total


def machine_busy_seconds() -> tuple[float, float]:
    """(busy CPU seconds summed over all cores, wall seconds) from ``/proc/stat``."""
    with open("/proc/stat", encoding="ascii") as f:
        first = f.readline().split()
    values = [int(v) for v in first[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    # guest time is already included in user/nice, so count only the first 8 fields.
    busy = sum(values[:8]) - idle
    return busy / CLK_TCK, time.monotonic()


def quiet_gate(threshold_pct: float, max_wait: float, sample: float = 0.5) -> float:
    """Wait (at most ``max_wait`` s) until the machine uses < ``threshold_pct`` % of a core.

    Returns the last level seen, in percent of one core.
    """
    deadline = time.monotonic() + max_wait
    while True:
        b0, t0 = machine_busy_seconds()
        time.sleep(sample)
        b1, t1 = machine_busy_seconds()
        level = 100.0 * (b1 - b0) / (t1 - t0)
        if level < threshold_pct or time.monotonic() >= deadline:
            return level


# -- pg_stat_database and WAL ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DbStats:
    """A snapshot of one database's counters and the cluster's WAL position."""

    xact_commit: int
    xact_rollback: int
    tup_inserted: int
    tup_updated: int
    tup_deleted: int
    wal_lsn: str

    @classmethod
    def read(cls, admin: psycopg.Connection[Any], dbname: str) -> DbStats:
        """Read fresh counters (``admin`` should be connected to another database)."""
        admin.execute("SELECT pg_stat_clear_snapshot()")
        row = admin.execute(
            "SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted,"
            " pg_current_wal_lsn()::text FROM pg_stat_database WHERE datname = %s",
            (dbname,),
        ).fetchone()
        if row is None:
            raise RuntimeError(f"database {dbname!r} not in pg_stat_database")
        return cls(*row)

    def delta(self, admin: psycopg.Connection[Any], before: DbStats) -> dict[str, int]:
        """Counter differences ``self - before``, WAL bytes included."""
        row = admin.execute(
            "SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)::bigint",
            (self.wal_lsn, before.wal_lsn),
        ).fetchone()
        assert row is not None
        return {
            "xact_commit": self.xact_commit - before.xact_commit,
            "xact_rollback": self.xact_rollback - before.xact_rollback,
            "tup_inserted": self.tup_inserted - before.tup_inserted,
            "tup_updated": self.tup_updated - before.tup_updated,
            "tup_deleted": self.tup_deleted - before.tup_deleted,
            "wal_bytes": int(row[0]),
        }


# -- statistics -------------------------------------------------------------------------


def percentile(samples: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) with linear interpolation between closest ranks."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max of the per-run values."""
    clean = [v for v in values if not math.isnan(v)]
    if not clean:
        return {"median": math.nan, "min": math.nan, "max": math.nan}
    return {"median": statistics.median(clean), "min": min(clean), "max": max(clean)}


#: The longest wait between two drain completion polls (seconds).
POLL_MAX = 1.0


def next_poll(done: int, left: int, seconds: float, interval: float) -> float:
    """Seconds until the next completion poll of a drain that completed ``done`` jobs in
    the last ``seconds`` and has ``left`` to go: a quarter of the time left at that rate,
    between ``interval`` and :data:`POLL_MAX`; ``interval`` while nothing is measured.
    """
    if done <= 0 or seconds <= 0:
        return interval
    return max(interval, min(POLL_MAX, left * seconds / done / 4))


# -- child processes --------------------------------------------------------------------


class Child:
    """A child process spoken to with lines on stdin/stdout (stderr passes through)."""

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None) -> None:
        self.argv = list(argv)
        self.proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=env,
        )
        self.pid = self.proc.pid
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def send(self, line: str) -> None:
        """Write one line to the child's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, timeout: float) -> str:
        """The next line the child prints; raises if it exits or stays silent."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.argv[1]}: no answer within {timeout:g} s") from None
        if line is None:
            code = self.proc.wait()
            raise RuntimeError(f"{self.argv[1]} exited with code {code} (see its stderr above)")
        return line

    def expect_json(self, timeout: float) -> dict[str, Any]:
        """The next line, decoded as a JSON object."""
        return json.loads(self.expect(timeout))

    def cpu_seconds(self) -> float:
        """CPU seconds the child (all its threads) has used so far."""
        return proc_cpu_seconds(self.pid)

    def close(self, timeout: float = 30) -> None:
        """Close stdin and wait for the child, killing it if it hangs."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)
