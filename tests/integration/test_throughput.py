"""Throughput counts: a real worker counts what it committed and what its leader rescued,
writes the counts, and the client reads them back per minute; a failed write loses nothing."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

import wai
from tests.integration._helpers import Work, fetch, serving, wait_for
from tests.integration.test_admin import make
from wai._tally import EVENTS
from wai.maintenance import DepthSampler
from wai.maintenance import _queries as maintenance_db
from wai.worker._throughput import ThroughputRecorder

pytestmark = pytest.mark.timeout(60)


def totals(minutes: list[wai.ThroughputMinute]) -> dict[str, int]:
    return {e: sum(m.counts[e] for m in minutes) for e in EVENTS}


async def settled(client: wai.AsyncClient) -> bool:
    [(live,)] = await fetch(
        client, "SELECT count(*) FROM wai.jobs WHERE state NOT IN ('completed', 'failed', "
        "'cancelled')",
    )  # fmt: skip
    return live == 0


async def test_a_known_workload_is_counted_exactly(aclient: wai.AsyncClient) -> None:
    snoozed: set[int] = set()

    @aclient.task(Work, queue="q")
    async def work(job: wai.Job[Work]) -> Any:
        n = job.args.n
        if 10 <= n < 12 and job.attempt == 1:
            return wai.RetryAfter(0)
        if n == 20:
            raise wai.TerminalError("declined")
        if n == 30:
            return wai.Cancel("gone")
        if n == 40 and job.id not in snoozed:  # a snooze refunds the attempt: once only
            snoozed.add(job.id)
            return wai.Snooze(0.05)
        return None

    # A running attempt of a dead worker: the leader rescues it, then it runs and completes.
    dead = await make(aclient, "running")
    await fetch(
        aclient, "UPDATE wai.jobs SET heartbeat_at = now() - interval '1 hour' WHERE id = %s",
        (dead.id,),
    )  # fmt: skip
    await aclient.insert_many([Work(n=n) for n in (0, 1, 2, 3, 4, 10, 11, 20, 30, 40)])
    async with serving(aclient, rescue_interval=0.1, throughput_interval=0.2):
        await wait_for(lambda: settled(aclient), timeout=20)
    # The shutdown wrote the last counts.

    minutes = await aclient.throughput(minutes=5)
    assert len(minutes) == 5
    assert minutes == sorted(minutes, key=lambda m: m.minute)
    assert totals(minutes) == {"completed": 5 + 2 + 1 + 1, "retried": 2, "failed": 1,
                               "cancelled": 1, "snoozed": 1, "parked": 0, "rescued": 1}  # fmt: skip
    assert totals(await aclient.throughput(minutes=5, queue="q"))["completed"] == 9
    assert totals(await aclient.throughput(minutes=5, queue="elsewhere"))["completed"] == 0
    assert totals(await aclient.throughput(minutes=5, kind="work"))["failed"] == 1
    assert totals(await aclient.throughput(minutes=5, kind="other"))["failed"] == 0


async def test_a_flush_cancelled_while_its_counts_commit_writes_them_once(
    aclient: wai.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shutdown cancels the periodic flush; if the server had committed the counts by
    then, the last flush must not write them again."""
    real = maintenance_db.throughput_add
    committed = asyncio.Event()

    async def late_acknowledgement(conn: Any, schema: str, counts: Any) -> None:
        await real(conn, schema, counts)
        await conn.commit()
        committed.set()
        await asyncio.sleep(0.5)

    monkeypatch.setattr(maintenance_db, "throughput_add", late_acknowledgement)
    recorder = ThroughputRecorder(aclient.pool, aclient.schema, interval=5)
    recorder.tally.add("q", "work", "completed", 3)
    flush = asyncio.create_task(recorder.flush())
    await committed.wait()
    flush.cancel()
    with pytest.raises(asyncio.CancelledError):
        await flush
    monkeypatch.setattr(maintenance_db, "throughput_add", real)
    await recorder.close()
    assert totals(await aclient.throughput(minutes=2))["completed"] == 3
    assert len(recorder.tally) == 0


async def test_the_window_has_every_minute(aclient: wai.AsyncClient) -> None:
    minutes = await aclient.throughput(minutes=60)
    assert len(minutes) == 60
    steps = {b.minute - a.minute for a, b in itertools.pairwise(minutes)}
    assert {s.total_seconds() for s in steps} == {60.0}
    assert all(m.counts == dict.fromkeys(EVENTS, 0) for m in minutes)


async def test_a_failed_write_keeps_the_counts(aclient: wai.AsyncClient) -> None:
    recorder = ThroughputRecorder(aclient.pool, aclient.schema, interval=5)
    recorder.tally.add("q", "work", "completed", 3)
    await fetch(aclient, "ALTER TABLE wai.throughput RENAME TO throughput_away")
    with pytest.raises(Exception, match="throughput"):
        await recorder.flush()
    assert len(recorder.tally) == 1
    recorder.tally.add("q", "work", "completed", 2)
    await fetch(aclient, "ALTER TABLE wai.throughput_away RENAME TO throughput")
    assert await recorder.flush() == 1
    assert totals(await aclient.throughput(minutes=2))["completed"] == 5
    assert await recorder.flush() == 0  # nothing twice


async def test_two_processes_add_to_the_same_minute(aclient: wai.AsyncClient) -> None:
    one = ThroughputRecorder(aclient.pool, aclient.schema, interval=5)
    two = ThroughputRecorder(aclient.pool, aclient.schema, interval=5)
    for recorder, n in ((one, 4), (two, 6)):
        recorder.tally.add("q", "work", "retried", n)
        recorder.tally.add("q", "mail", "retried", 1)
    await asyncio.gather(one.flush(), two.flush())
    assert totals(await aclient.throughput(minutes=2))["retried"] == 12


async def test_the_leader_forgets_counts_older_than_a_day(aclient: wai.AsyncClient) -> None:
    recorder = ThroughputRecorder(aclient.pool, aclient.schema, interval=5)
    recorder.tally.add("q", "work", "completed", 1)
    recorder.tally.add("q", "work", "failed", 1)
    await recorder.flush()
    await fetch(
        aclient, "UPDATE wai.throughput SET minute = minute - interval '25 hours' "
        "WHERE event = 'failed'",
    )  # fmt: skip
    result = await DepthSampler(aclient.pool, aclient.schema, interval=15).run_once()
    assert result.throughput_deleted == 1
    [(left,)] = await fetch(aclient, "SELECT count(*) FROM wai.throughput")
    assert left == 1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"minutes": 0}, "minutes"), ({"minutes": 1441}, "minutes"), ({"minutes": "5"}, "minutes"),
     ({"queue": "a b"}, "invalid queue name"), ({"kind": "k\x00"}, "kind")],
)  # fmt: skip
async def test_bad_parameters_are_refused(
    aclient: wai.AsyncClient, kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(wai.ValidationError, match=match):
        await aclient.throughput(**kwargs)
