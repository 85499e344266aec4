"""A single insert through each bridge, each in a transaction of its own, against client.insert.

    .venv/bin/python bench/bridges.py [--url URL] [--inserts 2000] [--rounds 3]

Runs on a scratch database (created, migrated and dropped). Each way inserts ``--inserts``
jobs one after another, each in its own transaction that commits it:

1. ``client.insert`` (wai's pool; the insert is its own transaction);
2. ``wai.bridge.insert_job`` on one psycopg ``AsyncConnection``, in ``conn.transaction()``;
3. ``wai.bridges.asyncpg.insert_job`` on one asyncpg connection, in ``conn.transaction()``;
4. ``wai.bridges.sqlalchemy.insert_job`` on an ``AsyncSession`` (asyncpg dialect), a
   session and ``session.begin()`` per job, the insert its first statement;
5. ``wai.bridges.sqlalchemy.insert_job_sync`` on a ``Session`` (psycopg dialect), the same;
6. ``wai.contrib.django.insert_job`` in ``transaction.atomic()`` on Django's connection
   (psycopg 3); Django's ORM is synchronous, so its rounds run in a thread of their own,
   timed there (the event loop waits meanwhile).

The ways alternate, round after round; each line shows the median round: jobs/s and
client CPU per insert (``getrusage``). The script checks that every job was stored.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

import asyncpg
import psycopg
from psycopg.conninfo import conninfo_to_dict
from scratch import cpu_seconds, measure, print_medians, scratch_database
from sqlalchemy import create_engine, make_url
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session
from wai_jobs import Noop

import wai
import wai.bridges.asyncpg
import wai.bridges.sqlalchemy

SCRATCH = "wai_bench_bridges"


def _sa_url(url: str, driver: str) -> str:
    return make_url(url).set(drivername=f"postgresql+{driver}").render_as_string(False)


def _django(url: str) -> tuple[Callable[[int, int], tuple[float, float]], Callable[[], None]]:
    """Django configured on ``url``; returns a round of ``n`` inserts from ``start``, each
    in its own ``atomic()`` (jobs/s, client CPU ms per insert), and the function that
    closes the calling thread's Django connection."""
    import django
    from django.conf import settings
    from django.db import connections, transaction

    import wai.contrib.django

    params = conninfo_to_dict(url)
    settings.configure(
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": params["dbname"],
                "HOST": params.get("host", ""),
                "PORT": params.get("port", ""),
                "USER": params.get("user", ""),
            }
        },
        INSTALLED_APPS=["wai.contrib.django"],
        WAI={"DATABASE": "default", "SCHEMA": "wai"},
        USE_TZ=True,
    )
    django.setup()

    def round_of(start: int, n: int) -> tuple[float, float]:
        cpu, t = cpu_seconds(), time.perf_counter()
        for i in range(start, start + n):
            with transaction.atomic():
                wai.contrib.django.insert_job(Noop(seq=i), queue="bench")
        elapsed, used = time.perf_counter() - t, cpu_seconds() - cpu
        return n / elapsed if n else 0.0, used / max(n, 1) * 1000

    return round_of, connections.close_all


async def main() -> None:
    """Measure and print the six ways."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--inserts", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    with scratch_database(opts.url, SCRATCH) as url:
        client = wai.AsyncClient(url)
        await client.open()
        await client.migrate()
        aconn = await psycopg.AsyncConnection.connect(url)
        pgconn = await asyncpg.connect(url)
        async_engine = create_async_engine(_sa_url(url, "asyncpg"), pool_size=1)
        sessions = async_sessionmaker(async_engine)
        sync_engine = create_engine(_sa_url(url, "psycopg"), pool_size=1)

        async def via_client(i: int) -> None:
            await client.insert(Noop(seq=i), queue="bench")

        async def via_psycopg(i: int) -> None:
            async with aconn.transaction():
                await wai.bridge.insert_job(aconn, Noop(seq=i), queue="bench")

        async def via_asyncpg(i: int) -> None:
            async with pgconn.transaction():
                await wai.bridges.asyncpg.insert_job(pgconn, Noop(seq=i), queue="bench")

        async def via_sa_async(i: int) -> None:
            async with sessions() as session, session.begin():
                await wai.bridges.sqlalchemy.insert_job(session, Noop(seq=i), queue="bench")

        async def via_sa_sync(i: int) -> None:
            with Session(sync_engine) as session, session.begin():
                wai.bridges.sqlalchemy.insert_job_sync(session, Noop(seq=i), queue="bench")

        ways: dict[str, Callable[[int], Awaitable[None]]] = {
            "1 client.insert": via_client,
            "2 wai.bridge (psycopg AsyncConnection)": via_psycopg,
            "3 wai.bridges.asyncpg (Connection)": via_asyncpg,
            "4 wai.bridges.sqlalchemy (AsyncSession, asyncpg)": via_sa_async,
            "5 wai.bridges.sqlalchemy (Session, psycopg)": via_sa_sync,
        }
        django_round, django_close = _django(url)
        # One thread for Django (its connections are per thread), closed at the end.
        django_thread = ThreadPoolExecutor(max_workers=1)
        loop = asyncio.get_running_loop()
        dj = "6 wai.contrib.django (atomic(), psycopg)"
        try:
            for fn in ways.values():  # warm up: connections, prepared statements, type lookups
                await fn(0)
            await loop.run_in_executor(django_thread, django_round, 0, 1)
            results: dict[str, list[tuple[float, float]]] = {name: [] for name in [*ways, dj]}
            for _ in range(opts.rounds):
                for name, fn in ways.items():
                    results[name].append(await measure(opts.inserts, 1, fn))
                results[dj].append(
                    await loop.run_in_executor(django_thread, django_round, 0, opts.inserts)
                )
            expected = (len(ways) + 1) * (1 + opts.rounds * opts.inserts)
            total = int(await pgconn.fetchval("SELECT count(*) FROM wai.jobs"))
            if total != expected:
                raise SystemExit(f"stored {total} jobs, expected {expected}")
            print(f"{opts.inserts} inserts per way and round, {opts.rounds} rounds; medians:")
            print_medians(results, 50, 3)
            print(f"stored {total} jobs, as expected")
        finally:
            await loop.run_in_executor(django_thread, django_close)
            django_thread.shutdown()
            await aconn.close()
            await pgconn.close()
            await async_engine.dispose()
            sync_engine.dispose()
            await client.close()


if __name__ == "__main__":
    asyncio.run(main())
