"""Typed args through a real insert, a real worker and a follow-up: the handler gets the
same types back, and args that no longer fit their type cost only their own job."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

import wai
from tests.integration._helpers import count, fetch, serving, wait_job
from tests.rich_args import Color, Level, Mode, Profile, Rich, sample
from wai import _kinds

pytestmark = pytest.mark.timeout(60)


@dataclass(frozen=True)
class Receipt:
    """A follow-up's args, typed too."""

    token: uuid.UUID
    amount: Decimal
    at: datetime


def capture(client: wai.AsyncClient, flavor: str) -> list[Any]:
    """Register a handler of Rich on queue "q" that records ``job.args``."""
    seen: list[Any] = []
    if flavor == "async":

        @client.task(Rich, queue="q")
        async def handle(job: wai.Job[Rich]) -> None:
            seen.append(job.args)

    else:

        @client.task(Rich, queue="q")
        def handle_sync(job: wai.Job[Rich]) -> None:
            seen.append(job.args)

    return seen


@pytest.mark.parametrize("flavor", ["async", "sync"])
async def test_typed_args_reach_the_handler_as_their_types(
    aclient: wai.AsyncClient, sclient: wai.Client, flavor: str
) -> None:
    seen = capture(aclient, flavor)
    args = sample()
    async with serving(aclient):
        first = await aclient.insert(args)
        second = await asyncio.to_thread(sclient.insert, args)
        for row in (first, second):
            await wait_job(aclient, row.id, "completed")

    assert seen == [args, args]
    back = seen[0]
    assert type(back) is Rich
    assert type(back.profile) is Profile
    assert back.at == args.at
    assert back.at.utcoffset() == args.at.utcoffset()
    assert back.naive.tzinfo is None
    assert type(back.amount) is Decimal
    assert back.amount == args.amount
    assert (back.color, back.level, back.mode) == (Color.BLUE, Level.HIGH, Mode.SAFE)
    assert type(back.pair) is tuple
    assert type(back.token) is uuid.UUID
    # Stored as plain JSON: readable by SQL and by any other client.
    (stored,) = (await fetch(aclient, "SELECT args FROM wai.jobs WHERE id = %s", (first.id,)))[0]
    assert stored["amount"] == "12345678901234567890.000000001"
    assert stored["profile"]["created"] == "2020-01-01T00:00:00Z"


async def test_a_follow_up_closure_gets_typed_args_and_returns_typed_args(
    aclient: wai.AsyncClient,
) -> None:
    seen = capture(aclient, "async")

    @aclient.on_completed_enqueue(Rich)
    def receipt(args: Rich, job: wai.JobRow) -> Receipt:
        return Receipt(token=args.token, amount=args.amount, at=args.at)

    received: list[Receipt] = []

    @aclient.task(Receipt, queue="q")
    async def handle_receipt(job: wai.Job[Receipt]) -> None:
        received.append(job.args)

    args = sample()
    async with serving(aclient):
        row = await aclient.insert(args)
        await wait_job(aclient, row.id, "completed")
        (follow,) = await aclient.list_jobs(trigger_job_id=row.id)
        await wait_job(aclient, follow.id, "completed")

    assert seen == [args]
    assert received == [Receipt(token=args.token, amount=args.amount, at=args.at)]


async def test_args_that_no_longer_fit_fail_their_own_job_naming_the_field(
    aclient: wai.AsyncClient,
) -> None:
    seen = capture(aclient, "async")
    stale: dict[str, Any] = json.loads(_kinds.encode_args(sample()))
    stale["profile"]["created"] = 1700000000  # a schema change made it a datetime
    async with serving(aclient):
        bad = await aclient.insert(stale, kind="rich")
        good = await aclient.insert(sample())
        failed = await wait_job(aclient, bad.id, "failed")
        await wait_job(aclient, good.id, "completed")

    assert seen == [sample()]
    (entry,) = failed.errors
    assert entry["terminal"] is True
    assert f"undecodable args for job {bad.id} ('rich')" in entry["error"]
    assert "Rich.profile.created: expected `datetime`, got `int`" in entry["error"]


@dataclass
class Holder:
    label: str
    extra: Any


class Opaque:
    """Nothing can encode it."""


async def test_an_unencodable_field_is_refused_at_insert_naming_its_path(
    aclient: wai.AsyncClient, sclient: wai.Client
) -> None:
    args = Holder(label="x", extra=[Profile(created=Opaque())])  # pyright: ignore[reportArgumentType]
    with pytest.raises(wai.SerializationError) as info:
        await aclient.insert(args)
    assert str(info.value) == "Holder.extra[0].created: cannot encode object of type Opaque"
    with pytest.raises(wai.SerializationError, match=r"^Holder\.extra\[0\]\.created"):
        await asyncio.to_thread(sclient.insert_many, [Holder(label="ok", extra=1), args])
    assert await count(aclient) == 0
