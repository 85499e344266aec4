"""What the in-process cost scripts share: a scratch database, and timing calls by CPU.

Used by ``insert_cost.py`` and ``batch_cost.py``.
"""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import LiteralString
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

__all__ = ["cpu_seconds", "database_url", "measure", "print_medians", "scratch_database"]


def cpu_seconds() -> float:
    """User plus system CPU time of this process."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def database_url(server: str, name: str) -> str:
    """The URL of database ``name`` on ``server`` (a URL whose database part, if any, is
    replaced): ``postgresql://u@host:port`` as well as a Unix socket's
    ``postgresql://u@?host=/run/dir&port=5432``."""
    parts = urlsplit(server)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))


@contextmanager
def scratch_database(server: str, name: str) -> Iterator[str]:
    """Create database ``name`` on ``server`` (dropping a leftover), yield its URL, drop it."""

    def admin(statement: LiteralString) -> None:
        with psycopg.connect(database_url(server, "postgres"), autocommit=True) as conn:
            conn.execute(sql.SQL(statement).format(sql.Identifier(name)))

    admin("DROP DATABASE IF EXISTS {}")
    admin("CREATE DATABASE {}")
    try:
        yield database_url(server, name)
    finally:
        admin("DROP DATABASE IF EXISTS {}")


async def measure(
    calls: int, per_call: int, fn: Callable[[int], Awaitable[None]]
) -> tuple[float, float]:
    """Await ``fn(i * per_call)`` for i in range(calls): (jobs/s, client CPU ms per job)."""
    cpu, t = cpu_seconds(), time.perf_counter()
    for i in range(calls):
        await fn(i * per_call)
    elapsed, used = time.perf_counter() - t, cpu_seconds() - cpu
    jobs = calls * per_call
    return jobs / elapsed, used / jobs * 1000


def print_medians(results: dict[str, list[tuple[float, float]]], width: int, digits: int) -> None:
    """One line per way: the median round's jobs/s and client CPU per job."""
    for name, runs in results.items():
        rate = statistics.median(r for r, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"{name:{width}s} {rate:8,.0f} jobs/s   client CPU {cpu:.{digits}f} ms/job")
