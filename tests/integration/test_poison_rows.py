"""A claimed row the worker cannot start costs only that row: never its claim's batch, never
a slot of the queue, never the worker.

Against a real PostgreSQL and a running worker: a row carrying progress wai never writes
(set by hand), and a row whose attempt cannot even be set up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from psycopg import sql

import wai
from tests.integration._helpers import serving, wait_job
from wai import _context
from wai._job import JobRow
from wai.worker import _runtime

pytestmark = pytest.mark.timeout(60)


@dataclass
class Work:
    n: int


async def _set_progress(client: wai.AsyncClient, job_id: int, progress: str) -> None:
    async with await psycopg.AsyncConnection.connect(client.database_url, autocommit=True) as c:
        await c.execute(
            sql.SQL("UPDATE {}.jobs SET progress = %s::jsonb WHERE id = %s").format(
                sql.Identifier(client.schema)
            ),
            (progress, job_id),
        )


async def test_progress_that_is_not_an_object_counts_as_none(aclient: wai.AsyncClient) -> None:
    seen: dict[int, Any] = {}

    @aclient.task(Work, queue="q")
    async def handler(job: wai.Job[Work]) -> None:
        seen[job.args.n] = job.progress

    rows = await aclient.insert_many([Work(n=i) for i in range(6)])
    await _set_progress(aclient, rows[2].id, "[1, 2]")
    await _set_progress(aclient, rows[3].id, '"text"')
    async with serving(aclient, {"q": 8}):
        for row in rows:
            await wait_job(aclient, row.id, "completed")
    assert seen == dict.fromkeys(range(6))


async def test_a_row_that_cannot_start_costs_only_itself_and_frees_its_slot(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    done: list[int] = []

    @aclient.task(Work, queue="q")
    async def handler(job: wai.Job[Work]) -> None:
        done.append(job.args.n)

    rows = await aclient.insert_many([Work(n=i) for i in range(5)])
    poisoned = rows[1].id

    class Failing(_context.AttemptState):
        def __init__(self, row: JobRow, loop: Any) -> None:
            if row.id == poisoned:
                raise RuntimeError("cannot set this attempt up")
            super().__init__(row, loop)

    monkeypatch.setattr(_runtime, "AttemptState", Failing)
    # One slot: had the poisoned row kept it, nothing after it would ever run.
    async with serving(aclient, {"q": wai.QueueConfig(concurrency=1, claim_batch_size=1)}):
        for row in rows:
            if row.id != poisoned:
                await wait_job(aclient, row.id, "completed")
        assert (await aclient.get_job(poisoned)).state == "running"  # rescue's to recover
    assert sorted(done) == [0, 2, 3, 4]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert any(f"job {poisoned} could not be started" in r.getMessage() for r in errors)
