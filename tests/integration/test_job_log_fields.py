"""Every ``wai.*`` record about a job names it: ``job_id``, ``kind``, ``queue``, ``attempt``.

Real jobs go through a real worker (a retry, an exhausted job, a completion at DEBUG, a
hook that raises, handlers that park on a callback), then through the resolutions, the
rescue of a callback that timed out, the outbox sweep of its failing follow-up and a
cron fire. Every record of ``wai.*`` is kept; each one that names a job in its message,
or carries ``job_id``, must carry the four fields with that job's values, and the
records of each event come at the level docs/logging.md gives them.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import wai
from tests.integration._helpers import Work, fetch, serving, wait_for, wait_job
from wai.maintenance import CronFirer, OutboxSweeper, Rescuer

pytestmark = pytest.mark.timeout(60)


@dataclass
class Pay:
    """A handler that parks on a callback."""

    order: int


@dataclass
class Receipt:
    order: int


_JOB = re.compile(r"\bjob (\d+)\b")
_ATTEMPT = re.compile(r"\battempt (\d+)/(\d+)\b")


def fields(record: logging.LogRecord) -> dict[str, Any]:
    return record.__dict__


def check_every_job_record(records: list[logging.LogRecord], jobs: dict[int, wai.JobRow]) -> int:
    """Assert the job fields of every record about one job; returns how many were checked."""
    checked = 0
    for record in records:
        message = record.getMessage()
        extra = fields(record)
        if "job_ids" in extra:
            assert extra["count"] == len(extra["job_ids"]), message
            assert set(extra["job_ids"]) <= jobs.keys(), message
        named = {int(n) for n in _JOB.findall(message)}
        if not named and "job_id" not in extra:
            continue
        assert "job_id" in extra, f"{record.name} {record.levelname}: {message!r} has no job_id"
        job = jobs[extra["job_id"]]
        assert named <= {job.id}, message
        for key in ("kind", "queue", "attempt"):
            assert key in extra, f"{record.name}: {message!r} has no {key}"
        assert (extra["kind"], extra["queue"]) == (job.kind, job.queue), message
        assert isinstance(extra["attempt"], int), message
        assert 0 <= extra["attempt"] <= job.max_attempts, message
        if (m := _ATTEMPT.search(message)) is not None:
            assert (extra["attempt"], extra["max_attempts"]) == (int(m[1]), int(m[2])), message
        checked += 1
    return checked


def one(records: list[logging.LogRecord], name: str, **match: Any) -> logging.LogRecord:
    found = [
        r
        for r in records
        if r.name == name and all(fields(r).get(k) == v for k, v in match.items())
    ]
    assert len(found) == 1, (name, match, [r.getMessage() for r in records if r.name == name])
    return found[0]


async def test_every_record_about_a_job_carries_its_fields_at_its_level(
    aclient: wai.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="wai")

    @aclient.task(Work, queue="q")
    async def work(job: wai.Job[Work]) -> None:
        if job.args.n == 1:
            raise ValueError("flaky\nsecond line")
        if job.args.n == 2:
            raise ValueError("broken for good")

    @aclient.task(Pay, queue="q")
    async def pay(job: wai.Job[Pay]) -> wai.WaitForCallback:
        return wai.WaitForCallback(await job.register_callback(timeout=3600))

    @aclient.on_event(Work)
    def hook(event: wai.events.JobEvent) -> None:
        if isinstance(event, wai.events.Completed):
            raise RuntimeError("the hook broke")

    @aclient.on_rescued_enqueue(Pay)
    def receipt(args: Pay, job: wai.JobRow, reason: wai.RescueReason) -> Receipt:
        raise RuntimeError("receipts are down")

    completed = await aclient.insert(Work(n=0))
    retried = await aclient.insert(Work(n=1), max_attempts=3)
    exhausted = await aclient.insert(Work(n=2), max_attempts=1)
    failed_by_callback = await aclient.insert(Pay(order=1))
    completed_by_callback = await aclient.insert(Pay(order=2))
    timed_out = await aclient.insert(Pay(order=3))
    async with serving(aclient):
        await wait_job(aclient, completed.id, "completed")
        await wait_job(aclient, retried.id, "retryable")
        await wait_job(aclient, exhausted.id, "failed")
        parked = {
            job.id: await wait_job(aclient, job.id, "waiting_external")
            for job in (failed_by_callback, completed_by_callback, timed_out)
        }
        await wait_for(
            lambda: any(r.name == "wai.hooks" for r in caplog.records), what="the hook's error"
        )

    # Resolutions, from a process that runs no worker.
    await aclient.fail_external(parked[failed_by_callback.id].callback_id, "card declined")
    await aclient.complete_external(parked[completed_by_callback.id].callback_id, {"ok": True})
    # The callback of the third one times out: rescue, then its follow-up fails to dispatch.
    await fetch(
        aclient,
        "UPDATE wai.jobs SET callback_timeout_at = now() - interval '1 second' WHERE id = %s",
        (timed_out.id,),
    )
    rescued = await Rescuer(aclient.pool, aclient.schema, interval=60, staleness=30).run_once()
    assert rescued.rescued == {"callback_timeout": 1}
    sweep = await OutboxSweeper(
        aclient.pool, aclient.schema, aclient.registry, interval=60
    ).run_once()
    assert sweep.failed == 1
    # A cron fire.
    aclient.periodic("tick", "* * * * *", Work(n=9))
    await aclient.upsert_cron()
    start = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    await fetch(aclient, "UPDATE wai.cron_schedules SET cursor_at = %s", (start,))
    cron = CronFirer(aclient.pool, aclient.schema, interval=60)
    assert (await cron.run_once(now=start + timedelta(seconds=90))).fired == {"tick": 1}

    jobs = {row.id: row for row in await aclient.list_jobs(limit=100)}
    records = [r for r in caplog.records if r.name.startswith("wai")]
    assert check_every_job_record(records, jobs) >= 10

    retry = one(records, "wai.jobs", job_id=retried.id, attempt=1)
    assert retry.levelno == logging.INFO
    assert fields(retry)["outcome"] == "retried"

    gone = one(records, "wai.jobs", job_id=exhausted.id)
    assert gone.levelno == logging.WARNING
    assert fields(gone)["outcome"] == "exhausted"
    assert gone.exc_info is None

    done = one(records, "wai.jobs", job_id=completed.id)
    assert done.levelno == logging.DEBUG
    assert fields(done)["outcome"] == "completed"

    broken_hook = one(records, "wai.hooks", job_id=completed.id)
    assert broken_hook.levelno == logging.ERROR
    assert broken_hook.exc_info is not None  # user code failed: its traceback
    assert fields(broken_hook)["event"] == "Completed"

    parks = [one(records, "wai.jobs", job_id=i, outcome="waiting_for_callback") for i in parked]
    assert {r.levelno for r in parks} == {logging.DEBUG}

    declined = one(records, "wai.jobs", job_id=failed_by_callback.id, outcome="exhausted")
    assert declined.levelno == logging.WARNING
    assert fields(declined)["callback_id"] == str(parked[failed_by_callback.id].callback_id)
    assert "card declined" in declined.getMessage()

    paid = one(records, "wai.jobs", job_id=completed_by_callback.id, outcome="completed")
    assert paid.levelno == logging.DEBUG

    timeout = one(records, "wai.maintenance", job_id=timed_out.id, reason="callback_timeout")
    assert timeout.levelno == logging.WARNING
    assert (fields(timeout)["count"], fields(timeout)["job_ids"]) == (1, [timed_out.id])
    assert fields(timeout)["attempt"] == 1

    dispatch = one(records, "wai.maintenance", job_id=timed_out.id, outcome="rescued")
    assert dispatch.levelno == logging.WARNING
    assert fields(dispatch)["outbox_attempt"] == 1
    assert "receipts are down" in dispatch.getMessage()

    (fired_id,) = [j.id for j in jobs.values() if j.metadata.get("wai.cron")]
    fire = one(records, "wai.maintenance", job_id=fired_id)
    assert fire.levelno == logging.DEBUG
    assert (fields(fire)["schedule"], fields(fire)["attempt"]) == ("tick", 0)

    # wai's own errors carry a traceback; nothing else at ERROR here but the hook's.
    errors = [r for r in records if r.levelno >= logging.ERROR]
    assert errors == [broken_hook]
