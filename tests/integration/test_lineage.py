"""client.lineage: a job's follow-up chain both ways, with the follow-ups still owed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

import wai
from tests.integration._helpers import fetch, serving, wait_for


@dataclass
class Order:
    n: int


@dataclass
class Invoice:
    n: int


@dataclass
class Email:
    n: int


@pytest.fixture
def chain(aclient: wai.AsyncClient) -> None:
    """Order completes -> Invoice; Invoice completes -> two Emails."""

    @aclient.task(Order, queue="q")
    async def order(job: wai.Job[Order]) -> None:
        return None

    @aclient.task(Invoice, queue="q")
    async def invoice(job: wai.Job[Invoice]) -> None:
        return None

    @aclient.task(Email, queue="q")
    async def email(job: wai.Job[Email]) -> None:
        return None

    aclient.on_completed_enqueue(Order, lambda a, j: Invoice(n=a.n), name="invoice")
    aclient.on_completed_enqueue(Invoice, lambda a, j: Email(n=a.n), name="receipt")
    aclient.on_completed_enqueue(Invoice, lambda a, j: Email(n=-a.n), name="copy")


async def _drained(client: wai.AsyncClient, expected: int) -> list[wai.JobRow]:
    async with serving(client, {"q": 4}):
        await wait_for(
            lambda: _all_completed(client, expected), 20, what=f"{expected} completed jobs"
        )
    return await client.list_jobs(limit=100)


async def _all_completed(client: wai.AsyncClient, expected: int) -> bool:
    rows = await client.list_jobs(state="completed", limit=100)
    return len(rows) == expected


async def test_lineage_walks_up_to_the_first_job_and_down_as_a_tree(
    aclient: wai.AsyncClient, chain: None
) -> None:
    order = await aclient.insert(Order(n=7))
    rows = await _drained(aclient, 4)
    by_kind = {r.kind: r for r in rows}
    invoice = by_kind["invoice"]
    emails = sorted((r for r in rows if r.kind == "email"), key=lambda r: r.id)

    down = await aclient.lineage(order.id)
    assert down.job.id == order.id
    assert down.ancestors == ()
    assert down.root.id == order.id
    assert [r.id for r in down.followups] == [invoice.id, *(e.id for e in emails)]
    assert [r.id for r in down.children(order.id)] == [invoice.id]
    assert sorted(r.id for r in down.children(invoice.id)) == [e.id for e in emails]
    assert (down.owed, down.truncated) == ((), False)

    up = await aclient.lineage(emails[0].id)
    assert [r.id for r in up.ancestors] == [invoice.id, order.id]  # nearest trigger first
    assert up.root.id == order.id
    assert up.followups == ()


async def test_limit_truncates_the_followups_and_says_so(
    aclient: wai.AsyncClient, chain: None
) -> None:
    order = await aclient.insert(Order(n=1))
    await _drained(aclient, 4)
    cut = await aclient.lineage(order.id, limit=2)
    assert len(cut.followups) == 2
    assert cut.truncated
    assert cut.followups[0].kind == "invoice"  # breadth first: the nearer level comes first
    assert not (await aclient.lineage(order.id, limit=3)).truncated


async def test_followups_still_owed_show_with_their_error(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    row = await aclient.insert(Order(n=2), queue="q")
    async with wai.AsyncClient(database_url) as bare:  # holds no spec: the outbox owes them
        await bare.cancel(row.id)
    await fetch(aclient, "UPDATE wai.outbox SET attempts = 3, last_error = 'Boom: no'")
    lineage = await aclient.lineage(row.id)
    [owed] = lineage.owed
    assert (owed.job_id, owed.outcome, owed.attempts, owed.last_error) == (
        row.id,
        "cancelled",
        3,
        "Boom: no",
    )


async def test_a_trigger_deleted_by_retention_ends_the_chain(
    aclient: wai.AsyncClient, chain: None
) -> None:
    order = await aclient.insert(Order(n=3))
    rows = await _drained(aclient, 4)
    invoice = next(r for r in rows if r.kind == "invoice")
    await fetch(aclient, "DELETE FROM wai.jobs WHERE id = %s", (order.id,))
    lineage = await aclient.lineage(invoice.id)
    assert lineage.ancestors == ()
    assert lineage.job.trigger is not None
    assert lineage.job.trigger.job_id == order.id
    assert len(lineage.followups) == 2


async def test_a_hand_made_cycle_still_ends(aclient: wai.AsyncClient) -> None:
    a = await aclient.insert(Order(n=1), queue="q")
    b = await aclient.insert(Order(n=2), queue="q")
    # a trigger pointing forward (b -> a -> b) cannot come from wai: the walks refuse it
    await fetch(
        aclient,
        "UPDATE wai.jobs SET trigger_job_id = CASE id WHEN %s THEN %s ELSE %s END,"
        " trigger_run_lease = 1, trigger_outcome = 'completed', trigger_spec = 's'"
        " WHERE id IN (%s, %s)",
        (a.id, b.id, a.id, a.id, b.id),
    )
    lineage = await aclient.lineage(b.id)
    assert [r.id for r in lineage.ancestors] == [a.id]
    assert lineage.followups == ()


@pytest.mark.parametrize("limit", [0, 10_001, True, 2.5])
async def test_a_bad_limit_is_a_clear_error(aclient: wai.AsyncClient, limit: Any) -> None:
    row = await aclient.insert(Order(n=1), queue="q")
    with pytest.raises(wai.ValidationError, match="limit"):
        await aclient.lineage(row.id, limit=limit)


@pytest.mark.parametrize("job_id", [0, -1, 2**63])
async def test_an_id_no_job_can_have_is_not_found(aclient: wai.AsyncClient, job_id: int) -> None:
    with pytest.raises(wai.JobNotFound):
        await aclient.lineage(job_id)


async def test_an_unknown_job_is_not_found(aclient: wai.AsyncClient) -> None:
    with pytest.raises(wai.JobNotFound):
        await aclient.lineage(123456)
