"""Process roles from the command line: ``wai maintenance`` and ``wai worker --processes N``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

import wai
from tests.integration._helpers import count, db_now, fetch, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

APP = textwrap.dedent(
    """
    import asyncio
    import os
    from dataclasses import dataclass

    import psycopg

    import wai

    client = wai.AsyncClient()  # the URL comes from the CLI (WAI_DATABASE_URL)

    @dataclass
    class Ping:
        n: int

    @client.task(Ping, queue="pings")
    async def ping(job: wai.Job[Ping]) -> None:
        url = os.environ["WAI_DATABASE_URL"]
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(
                "INSERT INTO runs (job_id, pid) VALUES (%s, %s)", (job.id, os.getpid())
            )
        await asyncio.sleep(0.02)
    """
)

#: Small timings for the processes under test.
FAST = (
    "--election-interval", "0.2",
    "--promote-interval", "0.05",
    "--record-interval", "0.2",
    "--shutdown-timeout", "5",
)  # fmt: skip


class Spawned:
    """``python -m wai ...`` processes, their stderr in files, none outliving the test."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.procs: list[asyncio.subprocess.Process] = []

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        env = {k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")}
        log = (self.cwd / f"wai-{len(self.procs)}.log").open("wb")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "wai",
            *args,
            cwd=self.cwd,
            env=env,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def output(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')}" for p in sorted(self.cwd.glob("*.log"))
        )

    async def stop(self, proc: asyncio.subprocess.Process, timeout: float = 30) -> int:
        proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            raise AssertionError(f"no exit {timeout}s after SIGTERM\n{self.output()}") from None

    async def close(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.kill()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 10)


@pytest.fixture
async def spawned(tmp_path: Path) -> AsyncIterator[Spawned]:
    (tmp_path / "app.py").write_text(APP)
    s = Spawned(tmp_path)
    try:
        yield s
    finally:
        await s.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _records(client: wai.AsyncClient) -> list[wai.RuntimeInstance]:
    return await client.list_runtime_instances()


async def test_maintenance_role_promotes_and_never_claims(
    aclient: wai.AsyncClient, database_url: str, spawned: Spawned
) -> None:
    now = await db_now(aclient)
    soon = now + timedelta(seconds=0.5)
    scheduled = [
        await aclient.insert({"n": 1}, kind="ping", queue="pings", run_at=soon),
        await aclient.insert({"n": 2}, kind="ping", queue="nowhere", run_at=soon),
    ]
    ready = await aclient.insert({"n": 3}, kind="ping", queue="pings")  # APP has a task for it
    ids = [row.id for row in [*scheduled, ready]]

    proc = await spawned.start("--database-url", database_url, "maintenance", "app:client", *FAST)

    async def leading() -> wai.RuntimeInstance | None:
        records = await _records(aclient)
        return records[0] if len(records) == 1 and records[0].leader else None

    try:
        record = await wait_for(leading, 20, what="the maintenance process to lead")
        assert record.role == "maintenance"
        assert record.queues == {}
        assert record.pid == proc.pid

        async def promoted() -> bool:
            return await count(aclient, "id = ANY(%s) AND state = 'available'", (ids,)) == 3

        await wait_for(promoted, 10, what="the scheduled jobs to be promoted")
    except AssertionError:
        raise AssertionError(spawned.output()) from None
    await asyncio.sleep(1)  # a worker would have claimed them long before this
    rows = await fetch(
        aclient, "SELECT state::text, attempt FROM wai.jobs WHERE id = ANY(%s)", (ids,)
    )
    assert rows == [("available", 0)] * 3

    assert await spawned.stop(proc) == 0, spawned.output()
    assert await _records(aclient) == []  # removed on the way out
    assert "maintenance for app:client" in spawned.output()


async def test_worker_processes_run_supervised_children(
    aclient: wai.AsyncClient, database_url: str, spawned: Spawned
) -> None:
    await fetch(aclient, "CREATE TABLE runs (job_id bigint NOT NULL, pid int NOT NULL)")
    supervisor = await spawned.start(
        "--database-url",
        database_url,
        "worker",
        "app:client",
        "--processes",
        "2",
        "--queue",
        "pings=2",
        "--poll-interval",
        "0.1",
        *FAST,
    )

    async def children(n: int = 2) -> set[int] | None:
        pids = {r.pid for r in await _records(aclient)}
        return pids if len(pids) == n else None

    try:
        first = await wait_for(children, 30, what="two worker processes")
        assert supervisor.pid not in first
        assert all(r.role == "worker+maintenance" for r in await _records(aclient))

        await aclient.insert_many(
            [wai.EnqueueRequest({"n": n}, kind="ping", queue="pings") for n in range(100)]
        )

        async def all_done() -> bool:
            return await count(aclient, "state = 'completed'") == 100

        await wait_for(all_done, 30, what="every job to complete")
        ran = {r[0] for r in await fetch(aclient, "SELECT DISTINCT pid FROM runs")}
        assert ran == first  # both children took jobs

        # a child killed outright is replaced
        victim = min(first)
        os.kill(victim, signal.SIGKILL)

        async def replaced() -> set[int] | None:
            pids = {r.pid for r in await _records(aclient)}  # the victim's row lingers
            fresh = pids - first
            return fresh if fresh and not _alive(victim) else None

        (newcomer,) = await wait_for(replaced, 30, what="the killed child to be restarted")
        assert _alive(newcomer)

        extra = await aclient.insert_many(
            [wai.EnqueueRequest({"n": n}, kind="ping", queue="pings") for n in range(20)]
        )

        async def extra_done() -> bool:
            return (
                await count(
                    aclient, "id = ANY(%s) AND state = 'completed'", ([r.id for r in extra],)
                )
                == 20
            )

        await wait_for(extra_done, 30, what="jobs after the restart")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{spawned.output()}") from None

    assert await spawned.stop(supervisor) == 0, spawned.output()
    survivors = first - {victim} | {newcomer}
    assert not any(_alive(pid) for pid in survivors)
    # graceful children removed their records; only the SIGKILLed one's is left for the leader
    assert {r.pid for r in await _records(aclient)} == {victim}
    output = spawned.output()
    assert f"(pid {victim}) was killed by SIGKILL; restarting in" in output
    assert "SIGTERM received: stopping 2 worker process(es)" in output


async def test_worker_processes_check_app_before_starting_children(
    database_url: str, spawned: Spawned
) -> None:
    # APP's client uses schema 'wai': refused once, before any child starts
    proc = await spawned.start(
        "--database-url", database_url, "--schema", "other", "worker", "app:client",
        "--processes", "2",
    )  # fmt: skip
    assert await asyncio.wait_for(proc.wait(), 30) == 2, spawned.output()
    output = spawned.output()
    assert "uses schema 'wai', not --schema 'other'" in output
    assert "started (pid" not in output
