"""What the runtime logs, that a broken log handler costs no job, and stopping at once."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import wai
from tests.integration._helpers import (
    FLAVORS,
    Work,
    fetch,
    register,
    serving,
    wait_for,
    wait_gate,
    wait_job,
)
from wai.maintenance import Rescuer
from wai.worker import _joblog

pytestmark = pytest.mark.timeout(60)


class Broken(Exception):
    """An exception whose ``str()`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class RaisingHandler(logging.Handler):
    """A handler that fails in ``handle`` itself, past logging's own error handling."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.calls = 0

    def handle(self, record: logging.LogRecord) -> bool:
        self.calls += 1
        raise RuntimeError("this handler is broken")


def raising_filter(record: logging.LogRecord) -> bool:
    if record.levelno == logging.DEBUG:
        return True  # the handler gets those, and raises
    raise ValueError("this filter is broken")


@pytest.fixture
def broken_logging() -> Iterator[RaisingHandler]:
    """The job and worker loggers at DEBUG, through a handler and a filter that both raise."""
    handler = RaisingHandler()
    loggers = [logging.getLogger("wai.jobs"), logging.getLogger("wai.worker")]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.addHandler(handler)
        logger.addFilter(raising_filter)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeFilter(raising_filter)
            logger.removeHandler(handler)
            logger.setLevel(logging.NOTSET)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_broken_log_handler_costs_no_job(
    aclient: wai.AsyncClient, broken_logging: RaisingHandler, flavor: str
) -> None:
    def body(job: wai.Job[Work]) -> None:
        if job.args.n == 1:
            raise ValueError("fails")
        if job.args.n == 2:
            raise Broken
        if job.args.n == 3:
            raise wai.TerminalError("for good")

    register(aclient, flavor, body, max_attempts=3)
    async with serving(aclient):
        done = await aclient.insert(Work(n=0))
        retried = await aclient.insert(Work(n=1))
        unprintable = await aclient.insert(Work(n=2))
        failed = await aclient.insert(Work(n=3))
        await wait_job(aclient, done.id, "completed")
        await wait_job(aclient, failed.id, "failed")
        row = await wait_job(aclient, retried.id, "retryable")
        assert row.attempt == 1
        row = await wait_job(aclient, unprintable.id, "retryable")
        assert row.attempt == 1  # counted: not an endless loop of refunded attempts
        assert row.errors[0]["error"].startswith("Broken: <str() of the exception raised>")
    assert broken_logging.calls > 0  # the handler was reached, and raised


async def test_failed_attempts_log_their_job_in_extra(
    aclient: wai.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="wai")

    def body(job: wai.Job[Work]) -> None:
        raise ValueError(f"bad {job.args.n}\nsecond line")

    register(aclient, "async", body, max_attempts=2)
    async with serving(aclient, dlq=True):
        first = await aclient.insert(Work(n=1))
        last = await aclient.insert(Work(n=2), max_attempts=1)
        await wait_job(aclient, first.id, "retryable")
        await wait_for(lambda: aclient.list_dlq(), what="the DLQ entry")  # empty until routed
        await wait_for(lambda: len(job_records(caplog)) == 2, what="two job records")
    retry, gone = sorted(job_records(caplog), key=lambda r: r.job_id)  # type: ignore[attr-defined]
    for record, job in ((retry, first), (gone, last)):
        extra: dict[str, Any] = record.__dict__
        assert extra["job_id"] == job.id
        assert (extra["kind"], extra["queue"], extra["attempt"]) == ("work", "q", 1)
        assert extra["max_attempts"] == job.max_attempts
    assert retry.levelno == logging.INFO
    assert "attempt 1/2 failed: ValueError: bad 1; retry in " in retry.getMessage()
    assert gone.levelno == logging.WARNING
    assert gone.getMessage().endswith(
        "failed: ValueError: bad 2; exhausted; moved to the dead-letter queue "
        "(max_attempts_exhausted)"
    )


def job_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "wai.jobs"]


async def test_nothing_is_described_when_the_levels_are_off(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    described: list[int] = []
    real = _joblog._describe  # pyright: ignore[reportPrivateUsage]

    def spy(outcome: Any, *args: Any) -> Any:
        described.append(outcome.job_id)
        return real(outcome, *args)

    monkeypatch.setattr(_joblog, "_describe", spy)
    jobs = logging.getLogger("wai.jobs")
    was = jobs.level
    register(aclient, "async", lambda job: (_ for _ in ()).throw(ValueError("x")), max_attempts=1)
    try:
        jobs.setLevel(logging.ERROR)  # (setLevel clears the loggers' cached levels)
        async with serving(aclient):
            row = await aclient.insert(Work(n=1))
            await wait_job(aclient, row.id, "failed")
        assert described == []

        jobs.setLevel(logging.WARNING)
        async with serving(aclient):
            row = await aclient.insert(Work(n=2))
            await wait_job(aclient, row.id, "failed")
        assert described == [row.id]
    finally:
        jobs.setLevel(was)


async def test_rescue_is_logged_with_its_jobs_and_reason(
    aclient: wai.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="wai.maintenance")
    ids = [(await aclient.insert(Work(n=n), queue="q")).id for n in range(3)]
    await fetch(
        aclient,
        "UPDATE wai.jobs SET state = 'running', attempt = 1, run_lease = run_lease + 1, "
        "attempted_at = now() - interval '1 hour', heartbeat_at = now() - interval '1 hour' "
        "WHERE id = ANY(%s)",
        (ids,),
    )
    result = await Rescuer(aclient.pool, aclient.schema, interval=60, staleness=30).run_once()
    assert result.rescued == {"stale_heartbeat": 3}
    (record,) = [r for r in caplog.records if r.name == "wai.maintenance"]
    assert record.levelno == logging.WARNING
    extra: dict[str, Any] = record.__dict__
    assert extra["reason"] == "stale_heartbeat"
    assert extra["count"] == 3
    assert sorted(extra["job_ids"]) == ids
    message = record.getMessage()
    assert message.startswith("rescued 3 jobs (stale_heartbeat): 3 to retry, 0 failed")
    for i in ids:
        assert str(i) in message


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_interrupt_records_running_attempts_as_retryable_at_once(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    started = threading.Event()
    gate = threading.Event()
    if flavor == "async":

        @aclient.task(Work, queue="q")
        async def hold(job: wai.Job[Work]) -> None:
            started.set()
            await asyncio.sleep(600)

    else:

        @aclient.task(Work, queue="q")
        def hold_sync(job: wai.Job[Work]) -> None:
            started.set()
            gate.wait(60)  # a thread cannot be interrupted: its late result is fenced

    try:
        # No maintenance: its promoter would make the retryable job (due at once) available
        # before the shutdown ends, whenever the machine is slow.
        async with serving(aclient, shutdown_timeout=300, maintenance=False):
            row = await aclient.insert(Work(n=1))
            await wait_gate(started)
            runtime = aclient._runtime  # pyright: ignore[reportPrivateUsage]
            assert runtime is not None
            assert runtime.running == 1
            runtime.interrupt()
            loop = asyncio.get_running_loop()
            began = loop.time()
            await aclient.shutdown(timeout=300)
            assert loop.time() - began < 30  # not the 300 s the timeout would allow
            assert runtime.interrupted
    finally:
        gate.set()
    done = await aclient.get_job(row.id)
    assert done.state == wai.JobState.RETRYABLE
    assert done.attempt == 1
    assert [e["attempt"] for e in done.errors] == [1]
    assert done.errors[0]["error"].startswith("worker interrupted")
