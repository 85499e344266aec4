"""wai behind a real PgBouncer in transaction pooling mode (docs/deployment.md, "Behind
PgBouncer"): producers and workers through it with ``prepared_statements=False``, LISTEN
on a direct connection (``listen_url``) or off (polling, said in the log), migrations
and leader election through it.

PgBouncer (Debian's ``pgbouncer``) is started by the module's fixture in front of the
test server. Without the binary the tests skip, unless ``WAI_PGBOUNCER_TESTS=required``
(CI sets it, and installs the package).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from psycopg.conninfo import conninfo_to_dict

import wai
from tests import _pgbouncer as pgbouncer
from tests.integration._helpers import count, serving, wait_for, wait_job

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@dataclass(frozen=True)
class Bouncer:
    port: int

    def url(self, direct_url: str) -> str:
        """``direct_url``'s database, through PgBouncer."""
        dbname = conninfo_to_dict(direct_url)["dbname"]
        user = quote(os.environ.get("PGUSER", "postgres"), safe="")
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"


@pytest.fixture(scope="module")
def bouncer() -> Iterator[Bouncer]:
    if pgbouncer.binary() is None:
        if os.environ.get("WAI_PGBOUNCER_TESTS") == "required":
            pytest.fail("pgbouncer is not installed (apt-get install pgbouncer)")
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    # Two server connections per database: client connections share them as a busy
    # application's would, so a statement one prepared is met by another.
    with pgbouncer.running(
        os.environ["PGHOST"], os.environ["PGPORT"], os.environ.get("PGUSER", "postgres"),
        pool_size=2,
    ) as port:  # fmt: skip
        yield Bouncer(port)


@dataclass
class Ping:
    n: int


@dataclass
class Pong:
    n: int


def pooled(bouncer: Bouncer, database_url: str, **options: object) -> wai.AsyncClient:
    return wai.AsyncClient(
        bouncer.url(database_url),
        prepared_statements=False,
        max_connections=8,
        **options,  # type: ignore[arg-type]
    )


async def test_producers_insert_through_pgbouncer(
    bouncer: Bouncer, database_url: str, aclient: wai.AsyncClient
) -> None:
    async with pooled(bouncer, database_url) as client:
        # many statements on several connections: each would be prepared by default
        await asyncio.gather(*(client.insert(Ping(n=i), queue="q") for i in range(60)))
        await client.insert_many([wai.EnqueueRequest(Ping(n=i), queue="q") for i in range(20)])
        await client.copy_many([wai.EnqueueRequest(Ping(n=i), queue="q") for i in range(20)])
        with contextlib.suppress(RuntimeError):
            async with client.transaction() as tx:
                await tx.insert(Ping(n=-1), queue="q")
                raise RuntimeError("roll back")
        async with client.transaction() as tx:
            await tx.insert(Ping(n=-2), queue="q")
        stats = {s.name: s for s in await client.queue_stats()}
    assert stats["q"].counts["available"] == 101
    assert await count(aclient, "(args->>'n')::int = -1") == 0
    with wai.Client(bouncer.url(database_url), prepared_statements=False) as sync:
        for i in range(30):
            sync.insert(Ping(n=100 + i), queue="q")
    assert await count(aclient) == 131


async def test_prepared_statements_break_behind_pgbouncer_which_is_why_they_go_off(
    bouncer: Bouncer, database_url: str
) -> None:
    client = wai.AsyncClient(bouncer.url(database_url), max_connections=8)  # prepared: default
    async with client:

        async def rounds() -> None:
            for _ in range(10):
                await asyncio.gather(*(client.insert(Ping(n=i), queue="q") for i in range(40)))

        with pytest.raises(wai.DatabaseError, match="prepared statement"):
            await rounds()


async def test_workers_run_through_pgbouncer_with_listen_on_a_direct_connection(
    bouncer: Bouncer, database_url: str
) -> None:
    async with pooled(bouncer, database_url, listen_url=database_url) as client:
        ran: list[int] = []

        @client.task(Ping, queue="q", max_attempts=3)
        async def ping(job: wai.Job[Ping]) -> wai.RetryAfter | None:
            if job.args.n % 5 == 0 and job.attempt == 1:
                return wai.RetryAfter(0.05)
            ran.append(job.args.n)
            return None

        @client.task(Pong, queue="q")
        async def pong(job: wai.Job[Pong]) -> None:
            return None

        client.on_completed_enqueue(Ping, lambda args, job: Pong(n=args.n))
        # a poll interval of a minute: only NOTIFY (on the direct connection) wakes them
        async with serving(client, {"q": 8}, poll_interval=60, promote_interval=0.05):
            runtime = client._runtime  # pyright: ignore[reportPrivateUsage]
            assert runtime is not None
            assert runtime.notifier is not None
            assert runtime.notifier.connected.is_set()
            rows = [await client.insert(Ping(n=i)) for i in range(40)]
            for row in rows:
                await wait_job(client, row.id, "completed", timeout=20)
            await wait_for(lambda: count_completed(client, "pong", 40), 20, what="the follow-ups")
    assert sorted(ran) == list(range(40))


async def count_completed(client: wai.AsyncClient, kind: str, n: int) -> bool | None:
    stats = await client.list_jobs(kind=kind, state="completed", limit=1000)
    return len(stats) == n or None


async def test_without_listen_the_queues_are_polled_and_the_log_says_so(
    bouncer: Bouncer, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="wai.worker")
    async with pooled(bouncer, database_url, listen_url="") as client:

        @client.task(Ping, queue="q")
        async def ping(job: wai.Job[Ping]) -> None:
            return None

        async with serving(client, {"q": 4}, poll_interval=0.1):
            runtime = client._runtime  # pyright: ignore[reportPrivateUsage]
            assert runtime is not None
            assert runtime.notifier is None
            rows = [await client.insert(Ping(n=i)) for i in range(20)]
            for row in rows:
                await wait_job(client, row.id, "completed", timeout=10)
    assert "LISTEN is off (listen_url=''): queues are polled every 0.1 s" in caplog.text


async def test_migrations_leader_election_and_rescue_through_pgbouncer(
    bouncer: Bouncer, empty_database_url: str
) -> None:
    url = bouncer.url(empty_database_url)
    async with (
        wai.AsyncClient(url, prepared_statements=False) as first,
        wai.AsyncClient(url, prepared_statements=False) as second,
    ):
        # two migrators at once: the transaction-scoped advisory lock makes them take turns
        applied = await asyncio.gather(first.migrate(), second.migrate())
        assert sorted(len(a) for a in applied)[0] == 0  # the second found nothing to do
        assert await first.pending_migrations() == []

        stuck = await first.insert(Ping(n=1), queue="stuck")
        async with first.transaction() as tx:
            await tx.execute(
                "UPDATE wai.jobs SET state = 'running', attempt = 1, run_lease = 1, "
                "attempted_at = now(), heartbeat_at = now() - interval '1 hour' WHERE id = %s",
                (stuck.id,),
            )
        settings = {"election_interval": 0.2, "rescue_interval": 0.1, "listen_url": ""}
        for client in (first, second):
            await client.start({}, **{k: v for k, v in settings.items() if k != "listen_url"})
        try:

            def leaders() -> list[wai.AsyncClient]:
                return [
                    c
                    for c in (first, second)
                    if c._runtime is not None  # pyright: ignore[reportPrivateUsage]
                    and c._runtime.elector is not None  # pyright: ignore[reportPrivateUsage]
                    and c._runtime.elector.is_leader  # pyright: ignore[reportPrivateUsage]
                ]

            await wait_for(lambda: leaders() or None, 10, what="a leader")
            await asyncio.sleep(1.0)  # several election rounds: still exactly one
            assert len(leaders()) == 1
            rescued = await wait_for(
                lambda: first_rescued(first, stuck.id), 10, what="the stuck job rescued"
            )
            assert rescued.state == "retryable"
        finally:
            await first.shutdown()
            await second.shutdown()


async def first_rescued(client: wai.AsyncClient, job_id: int) -> wai.JobRow | None:
    row = await client.get_job(job_id)
    return row if row.state != "running" else None
