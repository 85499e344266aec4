"""An outcome never commits without its follow-ups: every transition, in one file.

Each transition that ends or closes an attempt writes, in one transaction
(``wai.transitions``), the guarded update of its job, the follow-up jobs or the outbox rows
that owe them, and its dead-letter row. For every transition and every one of those writes,
the first test makes that write fail (a trigger refuses it) and checks that nothing of the
transition committed: the job row is exactly as before and no follow-up, outbox or
dead-letter row exists. The second runs the same transition unbroken and checks all of its
writes committed, once.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

import wai
from tests.integration._helpers import fetch
from wai._job import JobState
from wai._outcomes import Outcome
from wai.callbacks import CallbackExpressions
from wai.callbacks import _queries_async as callback_db
from wai.maintenance import Rescuer
from wai.transitions._finalize import apply_outcomes
from wai.worker import _queries as worker_db


@dataclass
class Pay:
    order: int


@dataclass
class Receipt:
    order: int


#: The writes a transition makes besides its guarded update, each refused by one trigger.
REFUSERS = {
    "followup": "BEFORE INSERT ON wai.jobs FOR EACH ROW WHEN (NEW.trigger_job_id IS NOT NULL)",
    "outbox": "BEFORE INSERT ON wai.outbox FOR EACH ROW",
    "dlq": "BEFORE INSERT ON wai.dlq FOR EACH ROW",
}


@asynccontextmanager
async def refusing(client: wai.AsyncClient, write: str) -> AsyncIterator[None]:
    """Make every ``write`` (a key of :data:`REFUSERS`) fail until the block ends."""
    await fetch(
        client,
        "CREATE FUNCTION wai.refuse() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$",
    )
    await fetch(client, f"CREATE TRIGGER refuse {REFUSERS[write]} EXECUTE FUNCTION wai.refuse()")  # type: ignore[arg-type]
    try:
        yield
    finally:
        table = REFUSERS[write].split(" ON ")[1].split()[0]
        await fetch(client, f"DROP TRIGGER refuse ON {table}")  # type: ignore[arg-type]
        await fetch(client, "DROP FUNCTION wai.refuse()")


async def snapshot(client: wai.AsyncClient, job_id: int) -> Any:
    """The job's row as stored, every column, or None when it left the jobs table."""
    rows = await fetch(client, "SELECT to_jsonb(j) FROM wai.jobs AS j WHERE id = %s", (job_id,))
    return rows[0][0] if rows else None


async def written(client: wai.AsyncClient, job_id: int) -> dict[str, int]:
    """How many follow-up jobs, outbox rows and dead-letter rows job ``job_id`` has."""
    [(followups, outbox, dlq)] = await fetch(
        client,
        "SELECT (SELECT count(*) FROM wai.jobs WHERE trigger_job_id = %(id)s),"
        " (SELECT count(*) FROM wai.outbox WHERE job_id = %(id)s),"
        " (SELECT count(*) FROM wai.dlq WHERE job_id = %(id)s)",
        {"id": job_id},
    )
    return {"followup": followups, "outbox": outbox, "dlq": dlq}


# -- the jobs each transition starts from ------------------------------------------------


async def claimed(client: wai.AsyncClient, *, max_attempts: int = 3) -> wai.JobRow:
    """A running attempt of a fresh Pay job in queue ``q``."""
    await client.insert(Pay(order=7), queue="q", max_attempts=max_attempts)
    async with client._connection() as conn:
        [row] = await worker_db.job_claim(
            conn, client.schema, queue="q", limit=1, deadlines={}, default_deadline=None
        )
    return row


async def parked(client: wai.AsyncClient) -> tuple[wai.JobRow, uuid.UUID]:
    """A Pay job parked in waiting_external on a fresh callback, as WaitForCallback leaves it."""
    row = await claimed(client)
    cid = uuid.uuid4()
    async with client._connection() as conn:
        registered = await callback_db.job_callback_register(
            conn,
            client.schema,
            job_id=row.id,
            run_lease=row.run_lease,
            callback_id=cid,
            timeout=3600,
            expressions=CallbackExpressions(),
        )
        assert registered is not None
        park = Outcome(
            job_id=row.id,
            run_lease=row.run_lease,
            state=JobState.WAITING_EXTERNAL,
            event="waiting_for_callback",
            callback_id=cid,
        )
        applied = await apply_outcomes(conn, client.schema, client.registry, [park])
    assert [r.state for r in applied.rows] == [JobState.WAITING_EXTERNAL]
    return applied.rows[0], cid


async def abandoned(client: wai.AsyncClient, how: str) -> wai.JobRow:
    """A job on its last attempt whose worker died, or whose callback timed out."""
    if how == "callback_timeout":
        row, _ = await parked(client)
        column = "callback_timeout_at"
        await fetch(client, "UPDATE wai.jobs SET max_attempts = 1 WHERE id = %s", (row.id,))
    else:
        row = await claimed(client, max_attempts=1)
        column = "heartbeat_at"
    await fetch(
        client,
        f"UPDATE wai.jobs SET {column} = now() - interval '1 hour' WHERE id = %s",  # type: ignore[arg-type]
        (row.id,),
    )
    return row


async def finalize(client: wai.AsyncClient, outcome: Outcome) -> None:
    """Write ``outcome`` as the finalizer does; a rejected outcome raises its error."""
    async with client._connection() as conn:
        applied = await apply_outcomes(conn, client.schema, client.registry, [outcome])
    for _, error in applied.rejected:
        raise error


# -- the transitions ---------------------------------------------------------------------


@dataclass(frozen=True)
class Transition:
    """One way a job's attempt ends: how to get there, do it, and what it writes."""

    name: str
    #: Makes the job and returns (its id, the transition to run on it).
    start: Callable[[wai.AsyncClient, wai.AsyncClient], Awaitable[tuple[int, Action]]]
    #: The state the job commits in (dead-lettered jobs leave the jobs table).
    state: JobState | None
    #: The writes besides the guarded update: keys of REFUSERS.
    writes: tuple[str, ...]


Action = Callable[[], Awaitable[object]]


async def worker_completes(here: wai.AsyncClient, bare: wai.AsyncClient) -> tuple[int, Action]:
    row = await claimed(here)
    done = Outcome(
        job_id=row.id, run_lease=row.run_lease, state=JobState.COMPLETED, event="completed"
    )
    return row.id, lambda: finalize(here, done)


async def worker_exhausts(here: wai.AsyncClient, bare: wai.AsyncClient) -> tuple[int, Action]:
    row = await claimed(here, max_attempts=1)
    failed = Outcome(
        job_id=row.id,
        run_lease=row.run_lease,
        state=JobState.FAILED,
        event="exhausted",
        error="boom",
    )
    return row.id, lambda: finalize(here, failed)


async def callback_completes(here: wai.AsyncClient, bare: wai.AsyncClient) -> tuple[int, Action]:
    row, cid = await parked(here)
    return row.id, lambda: here.complete_external(cid, {"ok": True})


async def callback_fails_elsewhere(
    here: wai.AsyncClient, bare: wai.AsyncClient
) -> tuple[int, Action]:
    # a process holding no spec (a web process, the CLI) resolves: the outbox owes them
    row, cid = await parked(here)
    return row.id, lambda: bare.fail_external(cid, "declined")


async def operator_cancels(here: wai.AsyncClient, bare: wai.AsyncClient) -> tuple[int, Action]:
    row = await claimed(here)
    return row.id, lambda: bare.cancel(row.id)


async def operator_drains(here: wai.AsyncClient, bare: wai.AsyncClient) -> tuple[int, Action]:
    row = await here.insert(Pay(order=1), queue="q")
    return row.id, lambda: bare.drain_queue("q")


def rescue_of(how: str) -> Callable[[wai.AsyncClient, wai.AsyncClient], Awaitable[Any]]:
    async def start(here: wai.AsyncClient, bare: wai.AsyncClient) -> tuple[int, Action]:
        row = await abandoned(here, how)
        rescuer = Rescuer(here.pool, here.schema, interval=60, staleness=30)
        return row.id, rescuer.run_once

    return start


TRANSITIONS = [
    Transition("worker completes", worker_completes, JobState.COMPLETED, ("followup",)),
    Transition("worker fails the last attempt", worker_exhausts, None, ("followup", "dlq")),
    Transition("callback completes", callback_completes, JobState.COMPLETED, ("followup",)),
    Transition("callback fails, no spec here", callback_fails_elsewhere, None, ("outbox", "dlq")),
    Transition("operator cancels", operator_cancels, JobState.CANCELLED, ("outbox",)),
    Transition("operator drains the queue", operator_drains, JobState.CANCELLED, ("outbox",)),
    Transition("rescue of a dead worker", rescue_of("stale_heartbeat"), None, ("outbox", "dlq")),
    Transition(
        "rescue of a callback timeout", rescue_of("callback_timeout"), None, ("outbox", "dlq")
    ),
]

CASES = [pytest.param(t, w, id=f"{t.name}: {w} refused") for t in TRANSITIONS for w in t.writes]


@pytest.fixture
async def here(aclient: wai.AsyncClient) -> wai.AsyncClient:
    """The process that runs Pay jobs: it holds their follow-up specs."""

    @aclient.task(Pay, queue="q")
    async def pay(job: wai.Job[Pay]) -> None:
        return None

    @aclient.task(Receipt, queue="q")
    async def receipt(job: wai.Job[Receipt]) -> None:
        return None

    aclient.on_completed_enqueue(Pay, lambda a, j: Receipt(order=a.order))
    aclient.on_exhausted_enqueue(Pay, lambda a, j, error, attempts: Receipt(order=-a.order))
    # dead-letter policy on for q, as a worker serving it with dlq=True records it
    await fetch(aclient, "INSERT INTO wai.queues (name, dlq) VALUES ('q', true)")
    return aclient


@pytest.fixture
async def bare(database_url: str) -> AsyncIterator[wai.AsyncClient]:
    """A process that holds no spec for Pay (the CLI, a web process)."""
    async with wai.AsyncClient(database_url) as client:
        yield client


@pytest.mark.parametrize(("transition", "write"), CASES)
async def test_a_refused_write_commits_nothing_of_its_transition(
    here: wai.AsyncClient, bare: wai.AsyncClient, transition: Transition, write: str
) -> None:
    job_id, act = await transition.start(here, bare)
    before = await snapshot(here, job_id)
    async with refusing(here, write):
        with pytest.raises(Exception, match="refused by the test"):
            await act()
    assert await snapshot(here, job_id) == before
    assert await written(here, job_id) == {"followup": 0, "outbox": 0, "dlq": 0}


@pytest.mark.parametrize("transition", TRANSITIONS, ids=[t.name for t in TRANSITIONS])
async def test_a_transition_commits_with_all_of_its_writes(
    here: wai.AsyncClient, bare: wai.AsyncClient, transition: Transition
) -> None:
    job_id, act = await transition.start(here, bare)
    await act()
    row = await snapshot(here, job_id)
    if transition.state is None:
        assert row is None  # failed in a dead-letter queue: moved there
    else:
        assert row["state"] == transition.state.value
    expected = {w: int(w in transition.writes) for w in ("followup", "outbox", "dlq")}
    assert await written(here, job_id) == expected
