"""Job args and handlers shared by the fault tests and their worker processes.

Each handler first records its attempt in the side table ``runs(job_id, run_lease,
pid)`` on a connection of its own (autocommit, never the worker's transaction), so
the tests can tell which process ran which attempt, and whether any attempt ran twice.
Handlers whose result is meant to arrive too late record ``late(job_id, run_lease,
pid)`` just before they return it.

- ``Mark`` (queue ``work``, async): sleeps ``sleep`` seconds, plus ``first_sleep`` on
  the first attempt only (a job that hangs until its worker is killed, then runs fast).
- ``Spin`` (queue ``cpu``, sync): a CPU-bound busy loop of ``seconds``.
- ``Overrun`` (queue ``deadline``, sync, deadline 0.5 s): on its first attempt it keeps
  running until that attempt has been closed behind its back (by its own worker's
  deadline, or by rescue), then returns normally, too late; later attempts return at once.
- ``Blocker`` (queue ``blocking``, async, deadline 0.5 s): on its first attempt it blocks
  the whole event loop (no await) until maintenance elsewhere has rescued it, then
  returns normally, too late; later attempts return at once.
- ``Hog`` (queue ``hog``, sync, deadline 0.5 s): with ``hold``, ignores its deadline and
  keeps its thread until the test inserts a row into ``released``; without, returns.
- ``Chain`` (queue ``chain``, async): a trigger of follow-ups. Its attempts up to
  ``hang_attempts`` hang (until their worker is killed); later ones return at once. Each
  completion enqueues two ``ChainNext`` follow-ups (specs ``chain-a``, and ``chain-b``
  in the ``_with`` form), each rescue one (spec ``chain-rescued``): see
  :data:`CHAIN_SPECS`. ``ChainNext`` (queue ``chain-next``, async) records its run.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

import wai

DEADLINE = 0.5

RECORD_RUN = "INSERT INTO runs (job_id, run_lease, pid) VALUES (%s, %s, %s)"
RECORD_LATE = "INSERT INTO late (job_id, run_lease, pid) VALUES (%s, %s, %s)"
STILL_MINE = "SELECT state = 'running' AND run_lease = %s FROM wai.jobs WHERE id = %s"


@dataclass
class Mark:
    n: int = 0
    sleep: float = 0.0
    first_sleep: float = 0.0


@dataclass
class Spin:
    seconds: float


@dataclass
class Overrun:
    hold: float = 20.0


@dataclass
class Blocker:
    hold: float = 20.0


@dataclass
class Hog:
    hold: bool = False


@dataclass
class Chain:
    n: int = 0
    hang_attempts: int = 0


@dataclass
class ChainNext:
    """A follow-up of ``Chain`` job ``trigger``'s attempt ``lease``, made by spec ``via``."""

    trigger: int
    lease: int
    via: str
    reason: str = ""


#: The follow-up specs registered for ``Chain``, by outcome, in registration order.
CHAIN_SPECS = {"completed": ("chain-a", "chain-b"), "rescued": ("chain-rescued",)}


def _wait_until_fenced(conn: psycopg.Connection[Any], job: wai.Job[Any], hold: float) -> None:
    """Block this thread until the job's row no longer belongs to this attempt."""
    end = time.monotonic() + hold
    while time.monotonic() < end:
        row = conn.execute(STILL_MINE, (job.run_lease, job.id)).fetchone()
        if row is None or not row[0]:
            return
        time.sleep(0.05)


def build(url: str, app: str, side: AsyncConnectionPool[Any]) -> wai.AsyncClient:
    """A client with every fault-test task registered."""
    client = wai.AsyncClient(url, max_connections=8)
    pid = os.getpid()

    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(url, autocommit=True, application_name=f"{app}-side")

    @client.task(Mark, queue="work")
    async def mark(job: wai.Job[Mark]) -> None:
        async with side.connection() as conn:
            await conn.execute(RECORD_RUN, (job.id, job.run_lease, pid))
        delay = job.args.sleep + (job.args.first_sleep if job.attempt == 1 else 0.0)
        if delay:
            await asyncio.sleep(delay)

    @client.task(Spin, queue="cpu")
    def spin(job: wai.Job[Spin]) -> None:
        with connect() as conn:
            conn.execute(RECORD_RUN, (job.id, job.run_lease, pid))
        end = time.monotonic() + job.args.seconds
        n = 0
        while time.monotonic() < end:  # pure Python: holds the GIL, drops it every 5 ms
            n += 1

    @client.task(Overrun, queue="deadline", deadline=DEADLINE)
    def overrun(job: wai.Job[Overrun]) -> None:
        with connect() as conn:
            conn.execute(RECORD_RUN, (job.id, job.run_lease, pid))
            if job.attempt == 1:
                _wait_until_fenced(conn, job, job.args.hold)
                conn.execute(RECORD_LATE, (job.id, job.run_lease, pid))

    @client.task(Blocker, queue="blocking", deadline=DEADLINE)
    async def blocker(job: wai.Job[Blocker]) -> None:
        with connect() as conn:  # deliberately blocking: the event loop stalls here
            conn.execute(RECORD_RUN, (job.id, job.run_lease, pid))
            if job.attempt == 1:
                _wait_until_fenced(conn, job, job.args.hold)
                conn.execute(RECORD_LATE, (job.id, job.run_lease, pid))

    @client.task(Hog, queue="hog", deadline=DEADLINE)
    def hog(job: wai.Job[Hog]) -> None:
        with connect() as conn:
            conn.execute(RECORD_RUN, (job.id, job.run_lease, pid))
            end = time.monotonic() + 30
            while job.args.hold and time.monotonic() < end:  # deaf to is_cancelled()
                if conn.execute("SELECT count(*) FROM released").fetchone() != (0,):
                    break
                time.sleep(0.05)
            if job.args.hold:
                conn.execute(RECORD_LATE, (job.id, job.run_lease, pid))

    @client.task(Chain, queue="chain")
    async def chain(job: wai.Job[Chain]) -> None:
        async with side.connection() as conn:
            await conn.execute(RECORD_RUN, (job.id, job.run_lease, pid))
        if job.attempt <= job.args.hang_attempts:
            await asyncio.sleep(120)

    @client.task(ChainNext, queue="chain-next")
    async def chain_next(job: wai.Job[ChainNext]) -> None:
        async with side.connection() as conn:
            await conn.execute(RECORD_RUN, (job.id, job.run_lease, pid))

    # stacked specs: both fire on every completion, in this order, one follow-up each
    client.on_completed_enqueue(
        Chain,
        lambda args, job: ChainNext(trigger=job.id, lease=job.run_lease, via="chain-a"),
        name="chain-a",
    )
    client.on_completed_enqueue_with(
        Chain,
        lambda args, job: wai.EnqueueRequest(
            ChainNext(trigger=job.id, lease=job.run_lease, via="chain-b"),
            queue="chain-next",
            priority=3,
        ),
        name="chain-b",
    )
    client.on_rescued_enqueue(
        Chain,
        lambda args, job, reason: ChainNext(
            trigger=job.id, lease=job.run_lease, via="chain-rescued", reason=str(reason)
        ),
        name="chain-rescued",
    )
    return client
