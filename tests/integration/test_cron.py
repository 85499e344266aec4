"""Periodic schedules against a real PostgreSQL: registration, upsert on start, firing by
the maintenance pass (compare-and-set, missed-fire policies, DST), and the operator
methods on both clients.

Firing passes run with an explicit ``now`` where the test needs a clock of its own
(DST dates, missed fires); the end-to-end test uses the database clock.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import wai
from tests.integration._helpers import Admin, count, fetch, serving, wait_for
from wai.maintenance import CronFirer

pytestmark = pytest.mark.timeout(60)


@dataclass
class Tick:
    """The args of the periodic jobs here."""

    n: int = 0


def firer(client: wai.AsyncClient) -> CronFirer:
    return CronFirer(client.pool, client.schema, interval=60)


async def set_cursor(client: wai.AsyncClient, name: str, at: datetime) -> None:
    await fetch(client, "UPDATE wai.cron_schedules SET cursor_at = %s WHERE name = %s", (at, name))


async def fired(client: wai.AsyncClient, name: str) -> list[tuple[datetime, str, dict[str, Any]]]:
    """(run_at, fire_time label, args) of the jobs fired by schedule ``name``, in id order."""
    rows = await fetch(
        client,
        "SELECT run_at, metadata -> 'wai.cron' ->> 'fire_time', args FROM wai.jobs"
        " WHERE metadata -> 'wai.cron' ->> 'name' = %s ORDER BY id",
        (name,),
    )
    return [(r[0], r[1], r[2]) for r in rows]


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


# -- registration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("every", "61 * * * *"), {}, "minute"),
        (("every", "* * *"), {}, "expected 5 fields"),
        (("every", "0 0 30 2 *"), {}, "never"),
        (("every", "* * * * *"), {"timezone": "Mars/Olympus"}, "Mars/Olympus"),
        (("every", "* * * * *"), {"missed_fire_policy": "all"}, "missed_fire_policy"),
        (("", "* * * * *"), {}, "schedule name"),
        (("every", "* * * * *"), {"priority": 9}, "priority"),
        (("every", "* * * * *"), {"metadata": {"wai.cron": 1}}, "reserved"),
        (("every", "* * * * *"), {"queue": "no spaces"}, "queue name"),
    ],
)
def test_registration_rejects_bad_schedules(
    aclient: wai.AsyncClient, args: tuple[str, str], kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(wai.ValidationError, match=match):
        aclient.periodic(args[0], args[1], Tick(), **kwargs)
    assert aclient.registry.periodics == {}


def test_a_name_registers_once(aclient: wai.AsyncClient) -> None:
    aclient.periodic("every", "* * * * *", Tick())
    with pytest.raises(wai.ValidationError, match="'every' is registered"):
        aclient.periodic("every", "*/5 * * * *", Tick())


def test_args_that_cannot_be_stored_are_rejected(aclient: wai.AsyncClient) -> None:
    with pytest.raises(wai.ValidationError):
        aclient.periodic("bad", "* * * * *", object())


# -- upsert on start --------------------------------------------------------------------


async def test_start_stores_schedules_and_a_redeploy_keeps_others_and_pauses(
    database_url: str,
) -> None:
    async with wai.AsyncClient(database_url) as first:

        @first.task(Tick, queue="ticks", max_attempts=3)
        async def tick(job: wai.Job[Tick]) -> None:
            pass

        first.periodic("minutely", "* * * * *", Tick(n=1), tags=["t"], metadata={"m": 1})
        first.periodic("nightly", "0 3 * * *", Tick(n=2), timezone="Europe/Paris")
        async with serving(first, {"ticks": 1}, maintenance=False):
            pass
        [minutely, nightly] = await first.list_cron()
        assert (minutely.name, minutely.kind, minutely.queue) == ("minutely", "tick", "ticks")
        assert (minutely.args, minutely.max_attempts, minutely.priority) == ({"n": 1}, 3, 2)
        assert (minutely.tags, minutely.metadata) == (("t",), {"m": 1})
        assert nightly.timezone == "Europe/Paris"
        assert nightly.next_fire_at is not None
        assert nightly.next_fire_at.astimezone(UTC).hour in (1, 2)  # 03:00 in Paris
        await first.pause_cron("nightly")
        created = nightly.created_at

    async with wai.AsyncClient(database_url) as second:  # a deploy that dropped "minutely"
        second.periodic("nightly", "30 4 * * *", Tick(n=3), timezone="Europe/Paris")
        assert await second.upsert_cron() == ["nightly"]
        names = [s.name for s in await second.list_cron()]
        assert names == ["minutely", "nightly"]
        nightly = await second.get_cron("nightly")
        assert (nightly.expr, nightly.args) == ("30 4 * * *", {"n": 3})
        assert nightly.paused  # the pause survived the redeploy
        assert nightly.next_fire_at is None
        assert nightly.created_at == created


async def test_an_unchanged_upsert_writes_nothing(aclient: wai.AsyncClient) -> None:
    aclient.periodic("same", "* * * * *", Tick())
    await aclient.upsert_cron()
    [before] = await fetch(aclient, "SELECT xmin::text FROM wai.cron_schedules")
    await aclient.upsert_cron()
    assert await fetch(aclient, "SELECT xmin::text FROM wai.cron_schedules") == [before]


# -- firing -----------------------------------------------------------------------------


async def test_catch_up_after_ten_missed_fires_enqueues_ten_in_order(
    aclient: wai.AsyncClient,
) -> None:
    aclient.periodic("m", "* * * * *", Tick(), missed_fire_policy="catch_up")
    await aclient.upsert_cron()
    await set_cursor(aclient, "m", utc(2026, 3, 1, 12, 0))
    result = await firer(aclient).run_once(now=utc(2026, 3, 1, 12, 10, 30))
    assert result.fired == {"m": 10}
    jobs = await fired(aclient, "m")
    assert [j[0] for j in jobs] == [utc(2026, 3, 1, 12, m) for m in range(1, 11)]
    assert [datetime.fromisoformat(j[1]) for j in jobs] == [j[0] for j in jobs]
    schedule = await aclient.get_cron("m")
    assert schedule.cursor_at == utc(2026, 3, 1, 12, 10)
    # nothing more is owed until the next minute
    assert (await firer(aclient).run_once(now=utc(2026, 3, 1, 12, 10, 59))).fired == {}
    assert (await firer(aclient).run_once(now=utc(2026, 3, 1, 12, 11))).fired == {"m": 1}


async def test_coalesce_enqueues_only_the_latest_missed_fire(aclient: wai.AsyncClient) -> None:
    aclient.periodic("m", "* * * * *", Tick())
    await aclient.upsert_cron()
    await set_cursor(aclient, "m", utc(2026, 3, 1, 12, 0))
    result = await firer(aclient).run_once(now=utc(2026, 3, 1, 12, 10, 30))
    assert result.fired == {"m": 1}
    assert [j[0] for j in await fired(aclient, "m")] == [utc(2026, 3, 1, 12, 10)]
    assert (await aclient.get_cron("m")).cursor_at == utc(2026, 3, 1, 12, 10)


async def test_fired_jobs_carry_the_schedule_in_their_metadata(aclient: wai.AsyncClient) -> None:
    aclient.periodic("m", "* * * * *", Tick(n=4), metadata={"team": "ops"}, priority=1)
    await aclient.upsert_cron()
    await set_cursor(aclient, "m", utc(2026, 3, 1, 12, 0))
    await firer(aclient).run_once(now=utc(2026, 3, 1, 12, 1))
    [row] = await aclient.list_jobs(kind="tick")
    assert row.metadata == {
        "team": "ops",
        "wai.cron": {"name": "m", "fire_time": "2026-03-01T12:01:00+00:00"},
    }
    assert (row.args, row.priority, row.state) == ({"n": 4}, 1, "available")


@wai.kind(queue="urgent", priority=1, max_attempts=4)
@dataclass
class Page:
    to: str


async def test_fired_jobs_take_the_args_types_declared_defaults(aclient: wai.AsyncClient) -> None:
    aclient.periodic("declared", "* * * * *", Page(to="oncall"))
    aclient.periodic("overridden", "* * * * *", Page(to="ops"), priority=3, queue="q")
    await aclient.upsert_cron()
    for name in ("declared", "overridden"):
        await set_cursor(aclient, name, utc(2026, 3, 1, 12, 0))
    await firer(aclient).run_once(now=utc(2026, 3, 1, 12, 1))
    fired_jobs = {r.args["to"]: r for r in await aclient.list_jobs(kind="page")}
    oncall, ops = fired_jobs["oncall"], fired_jobs["ops"]
    assert (oncall.queue, oncall.priority, oncall.max_attempts) == ("urgent", 1, 4)
    assert (ops.queue, ops.priority, ops.max_attempts) == ("q", 3, 4)


async def test_two_passes_racing_fire_each_time_once(
    aclient: wai.AsyncClient, database_url: str
) -> None:
    aclient.periodic("s", "* * * * * *", Tick(), missed_fire_policy="catch_up")
    await aclient.upsert_cron()
    await set_cursor(aclient, "s", utc(2026, 3, 1, 12, 0))
    now = utc(2026, 3, 1, 12, 5)  # 300 fires owed
    async with wai.AsyncClient(database_url) as other:
        racers = [firer(aclient), firer(other), firer(aclient), firer(other)]
        results = await asyncio.gather(*(f.run_once(now=now) for f in racers))
    assert sum(r.fired.get("s", 0) for r in results) == 300
    times = [j[0] for j in await fired(aclient, "s")]
    assert times == [utc(2026, 3, 1, 12, 0) + timedelta(seconds=i) for i in range(1, 301)]


async def test_a_paused_schedule_does_not_fire_and_resume_obeys_the_policy(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    aclient.periodic("c", "* * * * *", Tick())
    aclient.periodic("u", "* * * * *", Tick(), missed_fire_policy="catch_up")
    await aclient.upsert_cron()
    for name in ("c", "u"):
        await set_cursor(aclient, name, utc(2026, 3, 1, 12, 0))
        paused = await admin("pause_cron", name)
        assert paused.paused
    assert (await firer(aclient).run_once(now=utc(2026, 3, 1, 12, 5))).fired == {}
    for name in ("c", "u"):
        assert not (await admin("resume_cron", name)).paused
    result = await firer(aclient).run_once(now=utc(2026, 3, 1, 12, 5))
    assert result.fired == {"c": 1, "u": 5}


async def test_trigger_enqueues_now_even_when_paused_and_keeps_the_cursor(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    aclient.periodic("t", "0 0 1 1 *", Tick(n=9), queue="yearly")
    await aclient.upsert_cron()
    before = await aclient.pause_cron("t")
    row = await admin("trigger_cron", "t")
    assert (row.kind, row.queue, row.args, row.state) == ("tick", "yearly", {"n": 9}, "available")
    marker = row.metadata["wai.cron"]
    assert (marker["name"], marker["manual"]) == ("t", True)
    assert abs(datetime.fromisoformat(marker["fire_time"]) - row.created_at) < timedelta(seconds=1)
    after = await aclient.get_cron("t")
    assert (after.cursor_at, after.paused) == (before.cursor_at, True)


async def test_operator_actions_on_a_missing_schedule(admin: Admin) -> None:
    for method in ("get_cron", "pause_cron", "resume_cron", "trigger_cron", "delete_cron"):
        with pytest.raises(wai.ScheduleNotFound, match="no periodic schedule named 'ghost'"):
            await admin(method, "ghost")
    with pytest.raises(wai.ValidationError, match="schedule name"):
        await admin("pause_cron", "")


async def test_delete_removes_the_schedule(aclient: wai.AsyncClient, admin: Admin) -> None:
    aclient.periodic("d", "* * * * *", Tick())
    await aclient.upsert_cron()
    await admin("delete_cron", "d")
    assert await aclient.list_cron() == []
    assert (await firer(aclient).run_once(now=utc(2030, 1, 1))).fired == {}


async def test_an_unreadable_stored_schedule_is_skipped_not_fatal(aclient: wai.AsyncClient) -> None:
    aclient.periodic("ok", "* * * * *", Tick())
    aclient.periodic("bad", "* * * * *", Tick())
    await aclient.upsert_cron()
    await fetch(aclient, "UPDATE wai.cron_schedules SET expr = 'L * * * *' WHERE name = 'bad'")
    await fetch(aclient, "UPDATE wai.cron_schedules SET cursor_at = %s", (utc(2026, 3, 1),))
    result = await firer(aclient).run_once(now=utc(2026, 3, 1, 0, 1))
    assert result.fired == {"ok": 1}
    assert result.unreadable == ["bad"]


# -- DST --------------------------------------------------------------------------------


async def test_spring_forward_fires_a_skipped_local_time_once_after_the_gap(
    aclient: wai.AsyncClient,
) -> None:
    aclient.periodic("ny", "30 2 * * *", Tick(), timezone="America/New_York",
                     missed_fire_policy="catch_up")  # fmt: skip
    await aclient.upsert_cron()
    # 2026-03-08: New York clocks jump from 02:00 EST to 03:00 EDT
    await set_cursor(aclient, "ny", utc(2026, 3, 6, 12))
    await firer(aclient).run_once(now=utc(2026, 3, 10, 12))
    assert [j[0] for j in await fired(aclient, "ny")] == [
        utc(2026, 3, 7, 7, 30),  # 02:30 EST
        utc(2026, 3, 8, 7),  # 02:30 does not exist: 03:00 EDT, as the clocks jump
        utc(2026, 3, 9, 6, 30),  # 02:30 EDT
        utc(2026, 3, 10, 6, 30),
    ]


async def test_fall_back_fires_a_repeated_local_time_once_and_hourly_jobs_every_hour(
    aclient: wai.AsyncClient,
) -> None:
    aclient.periodic("daily", "30 2 * * *", Tick(), timezone="Europe/Paris",
                     missed_fire_policy="catch_up")  # fmt: skip
    aclient.periodic("hourly", "0 * * * *", Tick(), timezone="Europe/Paris",
                     missed_fire_policy="catch_up")  # fmt: skip
    await aclient.upsert_cron()
    # 2026-10-25: Paris clocks go back from 03:00 CEST to 02:00 CET
    start, end = utc(2026, 10, 24, 22), utc(2026, 10, 25, 23)  # Paris local day 10-25
    for name in ("daily", "hourly"):
        await set_cursor(aclient, name, start - timedelta(seconds=1))
    await firer(aclient).run_once(now=end - timedelta(seconds=1))
    # 02:30 happens twice (CEST, then CET): it fires at the first only
    assert [j[0] for j in await fired(aclient, "daily")] == [utc(2026, 10, 25, 0, 30)]
    hourly = [j[0] for j in await fired(aclient, "hourly")]
    assert len(hourly) == 25  # the repeated 02:00 hour fires twice
    assert hourly == [start + timedelta(hours=h) for h in range(25)]


# -- end to end -------------------------------------------------------------------------


async def test_the_maintenance_leader_fires_and_workers_run_the_jobs(
    aclient: wai.AsyncClient,
) -> None:
    ran: list[dict[str, Any]] = []

    @aclient.task(Tick, queue="q")
    async def tick(job: wai.Job[Tick]) -> None:
        ran.append(job.metadata["wai.cron"])

    aclient.periodic("sec", "* * * * * *", Tick())
    async with serving(aclient, {"q": 2}, cron_interval=0.1):
        await wait_for(lambda: len(ran) >= 2, timeout=10, what="two fires run")
    names = {m["name"] for m in ran}
    assert names == {"sec"}
    times = [datetime.fromisoformat(m["fire_time"]) for m in ran]
    assert len(set(times)) == len(times)
    assert await count(aclient, "metadata -> 'wai.cron' ->> 'name' = 'sec'") >= 2
