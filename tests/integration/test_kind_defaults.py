"""A kind's defaults declared on its args type hold for every client and insert path.

The producer here is often a ``wai.Client`` with an empty registry, as in a web app
that only imports the args module; the worker is an ``AsyncClient``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import psycopg
import pytest

import wai
from tests.integration._helpers import serving, wait_job
from wai._kinds import declared

pytestmark = pytest.mark.timeout(60)


@wai.kind(queue="signup", max_attempts=10, priority=3)
@dataclass
class Signup:
    user_id: int


@wai.kind(queue="mail", max_attempts=3)
@dataclass
class Welcome:
    user_id: int


def where(row: wai.JobRow) -> tuple[str, str, int, int]:
    return (row.kind, row.queue, row.priority, row.max_attempts)


DECLARED = ("signup", "signup", 3, 10)


def test_a_sync_client_with_an_empty_registry_inserts_the_declared_defaults(
    sclient: wai.Client, database_url: str
) -> None:
    assert sclient.registry.tasks == {}
    assert where(sclient.insert(Signup(user_id=1))) == DECLARED
    many = sclient.insert_many([Signup(user_id=2), wai.EnqueueRequest(Signup(user_id=3))])
    assert [where(r) for r in many] == [DECLARED, DECLARED]
    with sclient.transaction() as tx:
        assert where(tx.insert(Signup(user_id=4))) == DECLARED
        assert tx.copy_many([Signup(user_id=5)]) == 1
    assert sclient.copy_many([Signup(user_id=6), wai.EnqueueRequest(Signup(user_id=7))]) == 2
    with psycopg.connect(database_url) as conn:
        assert where(wai.bridge.insert_job_sync(conn, Signup(user_id=8))) == DECLARED
    rows = sclient.list_jobs(kind="signup", limit=100)
    assert sorted(r.args["user_id"] for r in rows) == list(range(1, 9))
    assert {where(r) for r in rows} == {DECLARED}


async def test_an_async_client_and_the_async_bridge_insert_the_declared_defaults(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    assert where(await aclient.insert(Signup(user_id=1))) == DECLARED
    assert [where(r) for r in await aclient.insert_many([Signup(user_id=2)])] == [DECLARED]
    assert await aclient.copy_many([Signup(user_id=3)]) == 1
    async with aclient.transaction() as tx:
        assert where(await tx.insert(Signup(user_id=4))) == DECLARED
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        assert where(await wai.bridge.insert_job(conn, Signup(user_id=5))) == DECLARED
    rows = await aclient.list_jobs(kind="signup", limit=100)
    assert len(rows) == 5
    assert {where(r) for r in rows} == {DECLARED}


def test_explicit_insert_options_override_the_declared_defaults(
    sclient: wai.Client, database_url: str
) -> None:
    options = {"queue": "urgent", "priority": 1, "max_attempts": 2}
    expected = ("signup", "urgent", 1, 2)
    assert where(sclient.insert(Signup(user_id=1), **options)) == expected
    (row,) = sclient.insert_many([wai.EnqueueRequest(Signup(user_id=2), **options)])
    assert where(row) == expected
    with psycopg.connect(database_url) as conn:
        assert where(wai.bridge.insert_job_sync(conn, Signup(user_id=3), **options)) == expected


async def test_a_declared_kind_runs_on_a_worker_of_its_queue(
    aclient: wai.AsyncClient, sclient: wai.Client
) -> None:
    ran: list[int] = []

    @aclient.task(Signup)  # the queue and budget come from the type
    async def handle(job: wai.Job[Signup]) -> None:
        ran.append(job.args.user_id)

    assert (aclient.registry.tasks["signup"].queue, aclient.registry.queues()) == (
        "signup",
        ["signup"],
    )
    async with serving(aclient, {"signup": 2}):
        row = await asyncio.to_thread(sclient.insert, Signup(user_id=7))
        await wait_job(aclient, row.id, "completed")
    assert ran == [7]


def test_a_task_contradicting_the_declaration_is_refused(aclient: wai.AsyncClient) -> None:
    with pytest.raises(wai.ValidationError, match="queue='default' \\(declared: 'signup'\\)"):
        aclient.task(Signup, queue="default")(lambda job: None)
    assert aclient.registry.tasks == {}


async def test_a_task_registration_routes_every_clients_inserts(
    aclient: wai.AsyncClient, sclient: wai.Client, database_url: str
) -> None:
    @dataclass
    class Report:
        month: int

    @aclient.task(Report, queue="reports", max_attempts=4)
    async def handle(job: wai.Job[Report]) -> None:
        return None

    assert declared(Report) == wai.KindDefaults(queue="reports", max_attempts=4)
    assert sclient.registry.tasks == {}  # another client, which registered nothing
    row = await asyncio.to_thread(sclient.insert, Report(month=5))
    assert (row.queue, row.max_attempts) == ("reports", 4)
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        row = await wai.bridge.insert_job(conn, Report(month=6))
    assert (row.queue, row.max_attempts) == ("reports", 4)


async def test_a_follow_up_takes_the_declared_defaults_of_its_args(
    aclient: wai.AsyncClient,
) -> None:
    @dataclass
    class Account:
        user_id: int

    @aclient.task(Account, queue="q")
    async def handle(job: wai.Job[Account]) -> None:
        return None

    # The worker has no task for Welcome: its queue and budget come from the type.
    aclient.on_completed_enqueue(Account, lambda args, job: Welcome(user_id=args.user_id))
    aclient.on_completed_enqueue_with(
        Account, lambda args, job: wai.EnqueueRequest(Welcome(user_id=0), priority=4)
    )
    async with serving(aclient):
        row = await aclient.insert(Account(user_id=9))
        await wait_job(aclient, row.id, "completed")
    follow = sorted(await aclient.list_jobs(trigger_job_id=row.id), key=lambda r: r.id)
    assert [where(r) for r in follow] == [("welcome", "mail", 2, 3), ("welcome", "mail", 4, 3)]


def test_dict_args_use_the_inserting_clients_registry_else_the_global_defaults(
    sclient: wai.Client, database_url: str
) -> None:
    row = sclient.insert({"user_id": 1}, kind="signup")
    assert (row.queue, row.max_attempts) == ("default", 25)  # no type: nothing declared

    @sclient.task("signup_dict", queue="dicts", max_attempts=6)
    def handle(job: wai.Job[dict[str, int]]) -> None:
        return None

    row = sclient.insert({"user_id": 1}, kind="signup_dict")
    assert (row.queue, row.max_attempts) == ("dicts", 6)
