"""Periodic schedules across a leadership change: no fire enqueued twice, none lost.

Two maintenance-only processes (``tests.faults.cron_process``) register the same
schedule ``tick``: every second (``* * * * * *``), policy ``catch_up``, so every fire
time is owed exactly once. Only the maintenance leader runs the cron firer, which
moves the schedule's cursor with a compare-and-set in the statement that inserts the
jobs. Whatever happens to the leader (SIGKILL, a stolen or expired lease, a stall
while another process leads), the fired jobs must then carry every second from the
first fire to the last exactly once, and the cursor must sit on the last one.

A probe trigger logs every fired job with the ``application_name`` of the session that
inserted it (each process has its own) and the inserting transaction, so the tests
can tell which process fired what, and when; another logs every write of the lease.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from tests.faults._contract import Db, Workers, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

ROOT = Path(__file__).resolve().parents[2]
SCHEDULE = "tick"
SECOND = timedelta(seconds=1)

#: One row per fired job that committed: who inserted it, in which transaction, when.
PROBE = """
CREATE TABLE cron_fires (
    job_id bigint NOT NULL,
    fire_time text NOT NULL,
    app text NOT NULL,
    txid bigint NOT NULL DEFAULT txid_current(),
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION log_cron_fire() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.cron_fires (job_id, fire_time, app)
    VALUES (NEW.id, NEW.metadata -> 'wai.cron' ->> 'fire_time',
            current_setting('application_name'));
    RETURN NULL;
END
$$;
CREATE TRIGGER log_cron_fire AFTER INSERT ON wai.jobs FOR EACH ROW
    WHEN (NEW.metadata ? 'wai.cron') EXECUTE FUNCTION log_cron_fire();
CREATE TABLE leases (
    leader_id text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION log_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.leases (leader_id) VALUES (NEW.leader_id);
    RETURN NULL;
END
$$;
CREATE TRIGGER log_lease AFTER INSERT OR UPDATE ON wai.leader FOR EACH ROW
    EXECUTE FUNCTION log_lease();
"""

#: Fires enqueued by a process after the lease had passed to another (a stale leader).
STALE_FIRES = """
SELECT f.fire_time, f.app, f.at, l.leader_id
FROM cron_fires AS f
CROSS JOIN LATERAL (
    SELECT leader_id FROM leases WHERE at <= f.at ORDER BY at DESC LIMIT 1
) AS l
WHERE l.leader_id <> %s::jsonb ->> f.app
ORDER BY f.at
"""

#: Sessions of the given processes waiting for a lock on a ``cron_schedules`` row.
BLOCKED = (
    "SELECT application_name FROM pg_stat_activity"
    " WHERE datname = current_database() AND application_name = ANY(%s)"
    " AND wait_event_type = 'Lock' AND query ILIKE '%%cron_schedules%%'"
)


@dataclass
class CronProcess:
    """One ``cron_process``: its OS process, session name, log and leader id."""

    proc: asyncio.subprocess.Process
    app: str
    log: Path
    instance: str = ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace")


async def spawn(
    workers: Workers, url: str, app: str, *, election: float, cron: float = 0.2
) -> CronProcess:
    """Start a cron process (killed at the end of the test if still running).

    Its lease lasts ``2 x election`` seconds and is renewed every ``election / 2``; as
    the leader, it runs a cron pass every ``cron`` seconds.
    """
    env = {**os.environ, "PGAPPNAME": app, "PYTHONUNBUFFERED": "1"}
    path = workers.logs / f"{len(workers.procs)}-{app}.log"
    with path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.faults.cron_process", url, "--app", app,
            "--election", str(election), "--cron", str(cron),
            cwd=ROOT, env=env, stdout=log, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
    workers.procs.append(proc)
    return CronProcess(proc, app, path)


async def ready(workers: Workers, p: CronProcess) -> None:
    """Wait for the process's READY line; learn its leader id from it."""

    async def announced() -> str | None:
        if p.proc.returncode is not None:
            raise AssertionError(f"{p.app} exited with {p.proc.returncode}\n{workers.output()}")
        found = re.search(rf"^READY pid={p.pid} instance=(\S+)$", p.text(), re.MULTILINE)
        return found[1] if found else None

    p.instance = await wait_for(announced, 30, what=f"{p.app} to be ready", diagnose=workers.output)


async def start_pair(db: Db, workers: Workers, **options: float) -> dict[int, CronProcess]:
    """Two cron processes, ready, one of them leading and firing; by pid."""
    await db.rows(PROBE)
    pair = [await spawn(workers, db.url, f"cron-{n}", **options) for n in ("a", "b")]
    for p in pair:
        await ready(workers, p)
    procs = {p.pid: p for p in pair}
    await wait_for(
        lambda: leader_has_fired(db, procs, 2), 30, what="fires", diagnose=workers.output
    )
    return procs


async def leader_has_fired(
    db: Db, procs: dict[int, CronProcess], n: int
) -> tuple[CronProcess, str] | None:
    """(process, leader id) of the leader once it has fired ``n`` times, else None."""
    found = await db.leader()
    if found is None or found[0] not in procs:
        return None
    fired = await db.value("SELECT count(*) FROM cron_fires WHERE app = %s", (procs[found[0]].app,))
    return (procs[found[0]], found[1]) if fired >= n else None


async def fired_since(db: Db, app: str, since: datetime) -> bool:
    """Whether ``app`` fired a fire time at least ``since``."""
    n = await db.value(
        "SELECT count(*) FROM cron_fires WHERE app = %s AND fire_time::timestamptz >= %s",
        (app, since),
    )
    return int(n) > 0


@dataclass
class Fires:
    """What the checks saw: fire time -> (process, transaction, insert time)."""

    by_time: dict[datetime, tuple[str, int, datetime]]
    first: datetime
    last: datetime

    def of(self, app: str) -> list[datetime]:
        return sorted(t for t, (a, _, _) in self.by_time.items() if a == app)

    def batches(self, app: str) -> list[int]:
        """How many fires each of ``app``'s transactions enqueued, in order."""
        per_tx = Counter(tx for a, tx, _ in self.by_time.values() if a == app)
        return [per_tx[tx] for tx in sorted(per_tx)]


async def check_fires(db: Db, workers: Workers) -> Fires:
    """Assert: every second from the first fire to the last enqueued exactly once.

    Also: each job is the schedule's (kind, queue, args), runs at its fire time, and
    was logged by the probe; the first fire is the first second after the schedule
    was created; the cursor and ``last_fire_at`` are the last fire time.
    """
    jobs = await db.rows(
        "SELECT id, metadata -> 'wai.cron' ->> 'name', metadata -> 'wai.cron' ->> 'fire_time',"
        " run_at, kind, queue, args, state::text FROM wai.jobs ORDER BY id"
    )
    log = {
        r[0]: (r[1], r[2], r[3], r[4])
        for r in await db.rows(
            "SELECT job_id, app, txid, at, fire_time FROM cron_fires ORDER BY job_id"
        )
    }

    def listing() -> str:
        lines = [
            f"job {job_id}: fire {label} by {app} tx {tx} at {at.isoformat()}"
            for job_id, (app, tx, at, label) in sorted(log.items())
        ]
        return "\n".join(lines) + "\n" + workers.output()

    assert jobs, "no job was fired"
    problems: list[str] = []
    times: list[datetime] = []
    for job_id, name, label, run_at, kind, queue, args, state in jobs:
        if name != SCHEDULE or label is None:
            problems.append(f"job {job_id} is not a fire of {SCHEDULE!r}: {name!r} {label!r}")
            continue
        fire = datetime.fromisoformat(label)
        times.append(fire)
        if (run_at, kind, queue, args, state) != (
            fire,
            "tick",
            "cron",
            {"source": "cron_process"},
            "available",
        ):
            problems.append(f"job {job_id} (fire {label}): {run_at} {kind} {queue} {args} {state}")
        if job_id not in log:
            problems.append(f"job {job_id} (fire {label}) was not logged by the probe")
    duplicates = sorted(t for t, n in Counter(times).items() if n > 1)
    if duplicates:
        problems.append(f"{len(duplicates)} fire times enqueued more than once: {duplicates}")
    first, last = min(times), max(times)
    expected = [first + k * SECOND for k in range(int((last - first) / SECOND) + 1)]
    missing = sorted(set(expected) - set(times))
    if missing:
        problems.append(f"{len(missing)} fire times lost between {first} and {last}: {missing}")
    stray = sorted(set(times) - set(expected))
    if stray:
        problems.append(f"fire times off the whole seconds: {stray}")
    if len(log) != len(jobs):
        problems.append(f"the probe logged {len(log)} fires for {len(jobs)} jobs")
    cursor, last_fire, created = (
        await db.rows(
            "SELECT cursor_at, last_fire_at, created_at FROM wai.cron_schedules WHERE name = %s",
            (SCHEDULE,),
        )
    )[0]
    if (cursor, last_fire) != (last, last):
        problems.append(f"cursor_at {cursor}, last_fire_at {last_fire}: the last fire is {last}")
    first_owed = created.replace(microsecond=0) + SECOND
    if first != first_owed:
        problems.append(f"first fire {first}, but {first_owed} is owed (created {created})")
    assert not problems, "\n".join(problems) + "\n" + listing()
    assert len(jobs) == len(set(times)) == len(expected)

    by_time = {datetime.fromisoformat(label): (app, tx, at) for app, tx, at, label in log.values()}
    fires = Fires(by_time, first.astimezone(UTC), last.astimezone(UTC))
    print(f"{len(jobs)} fires from {fires.first} to {fires.last}")
    for app in sorted({a for a, _, _ in by_time.values()}):
        print(f"  {app}: {len(fires.of(app))} fires in batches {fires.batches(app)}")
    return fires


def lost_passes(p: CronProcess) -> int:
    """Cron passes of ``p`` whose compare-and-set found the cursor moved by another."""
    return p.text().count("lost=['tick']")


async def test_sigkill_of_the_leader_neither_duplicates_nor_loses_a_fire(
    database_url: str, workers: Workers
) -> None:
    """The leader is SIGKILLed; its 2 s lease runs out and the other process takes over.

    The fire times that fell due in between (about two) are owed by the successor,
    which enqueues them in its first pass, before the ones that follow.
    """
    db = Db(database_url)
    procs = await start_pair(db, workers, election=1.0)
    victim, old_id = await wait_for(
        lambda: leader_has_fired(db, procs, 2), 30, what="the leader's fires"
    )
    (survivor,) = (p for p in procs.values() if p is not victim)
    assert old_id == victim.instance

    await workers.kill(victim.proc)
    killed_at: datetime = await db.value("SELECT now()")

    async def survivor_leads() -> tuple[int, str] | None:
        found = await db.leader()
        return found if found and found[0] == survivor.pid else None

    _, new_id = await wait_for(survivor_leads, 20, what="the takeover", diagnose=workers.output)
    assert new_id == survivor.instance != old_id
    await wait_for(
        lambda: fired_since(db, survivor.app, killed_at + 3 * SECOND),
        20,
        what="the new leader's fires",
        diagnose=workers.output,
    )
    assert await workers.stop(survivor.proc) == 0, workers.output()

    fires = await check_fires(db, workers)
    assert fires.of(victim.app), "the killed leader fired nothing"
    # Fires are only enqueued once due (by the database clock): whatever is due after
    # the kill was enqueued by the survivor, and the run continues with no gap.
    late = [t for t in fires.by_time if t > killed_at]
    assert len(late) >= 3
    assert {fires.by_time[t][0] for t in late} == {survivor.app}
    assert fires.last >= killed_at + 3 * SECOND


async def test_stolen_and_expired_leases_neither_duplicate_nor_lose_a_fire(
    database_url: str, workers: Workers
) -> None:
    """Both processes stay up; the lease is expired or handed over under them, again and
    again, so that the old leader may fire once more while the new one already does.

    Each change lands just before a fire time falls due, and the leaders run a cron pass
    every 50 ms: both processes then likely try to fire the same second.
    """
    db = Db(database_url)
    procs = await start_pair(db, workers, election=0.3, cron=0.05)
    by_instance = {p.instance: p for p in procs.values()}
    for round_ in range(6):
        into_second = await db.value("SELECT extract(epoch FROM clock_timestamp()) % 1")
        await asyncio.sleep((0.9 - float(into_second)) % 1.0)
        found = await db.leader()
        holder = by_instance.get(found[1]) if found else None
        since: datetime = await db.value("SELECT now()")
        if round_ % 2 == 0 or holder is None:
            # expired: whichever process asks first (the old leader renews) takes it
            await db.rows("UPDATE wai.leader SET expires_at = now()")
        else:
            # stolen: the other process finds the lease in its own name and starts its
            # services; the old leader keeps firing until its next renewal fails
            (other,) = (p for p in procs.values() if p is not holder)
            await db.rows(
                "UPDATE wai.leader SET leader_id = %s, elected_at = now(),"
                " expires_at = now() + interval '0.6 seconds' WHERE leader_id = %s",
                (other.instance, holder.instance),
            )

        async def holder_fired(since: datetime = since) -> str | None:
            """The app of the lease holder, once it has fired since the change."""
            found = await db.leader()
            app = procs[found[0]].app if found and found[0] in procs else None
            n = await db.value(
                "SELECT count(*) FROM cron_fires WHERE app = %s AND at > %s", (app, since)
            )
            return app if int(n) > 0 else None

        app = await wait_for(holder_fired, 20, what=f"the leader's fires after round {round_}")
        change = "expired" if round_ % 2 == 0 else "stolen"
        print(f"round {round_}: lease of {holder and holder.app} {change}, {app} fires")

    for p in procs.values():
        assert await workers.stop(p.proc) == 0, workers.output()
    fires = await check_fires(db, workers)
    assert all(fires.of(p.app) for p in procs.values()), "a process never fired"
    instances = json.dumps({p.app: p.instance for p in procs.values()})
    for fire_time, app, at, lease in await db.rows(STALE_FIRES, (instances,)):
        print(f"stale fire: {fire_time} by {app} at {at.isoformat()}, lease of {lease}")
    for p in procs.values():
        steps_down = p.text().count("lost maintenance leadership")
        print(f"{p.app}: {lost_passes(p)} lost compare-and-sets, stepped down {steps_down} times")


async def test_a_stalled_leader_and_its_successor_race_for_the_cursor(
    database_url: str, workers: Workers
) -> None:
    """The leader stalls (SIGSTOP) in the middle of a pass, its lease runs out and the
    other process takes over; both then write the cursor each read: one must lose.

    A row lock the test holds on the schedule makes the race certain: the leader's
    firing statement waits for it (it has read the cursor), the leader is stopped, the
    successor's first pass reads the same cursor and waits behind it. When the test
    lets go, the stalled leader's statement (first in line) fires, and the successor's
    compare-and-set finds the cursor moved and enqueues nothing.
    """
    db = Db(database_url)
    procs = await start_pair(db, workers, election=1.0)
    apps = {p.app: p for p in procs.values()}
    stalled: CronProcess | None = None
    lock = await psycopg.AsyncConnection.connect(database_url, application_name="fault-lock")
    try:
        await lock.execute(
            "SELECT 1 FROM wai.cron_schedules WHERE name = %s FOR UPDATE", (SCHEDULE,)
        )

        async def blocked(names: list[str]) -> list[str]:
            return [r[0] for r in await db.rows(BLOCKED, (names,))]

        (stuck,) = await wait_for(
            lambda: blocked(list(apps)), 20, what="the leader's firing to wait for the lock"
        )
        stalled = frozen = apps[stuck]
        os.kill(frozen.pid, signal.SIGSTOP)
        (successor,) = (p for p in procs.values() if p is not frozen)
        assert await blocked([frozen.app]) == [frozen.app], "the stalled leader stopped waiting"
        await wait_for(
            lambda: blocked([successor.app]),
            20,
            what="the successor's firing to wait for the lock",
            diagnose=workers.output,
        )
        leader = await db.leader()
        assert leader is not None
        assert leader[0] == successor.pid
        elected_at: datetime = await db.value(
            "SELECT elected_at FROM wai.leader WHERE leader_id = %s", (leader[1],)
        )
        released_at: datetime = await db.value("SELECT now()")
        await lock.commit()

        # The statement the stalled leader sent before its stall goes first: it fires,
        # after its successor was elected (and while it is still stopped)...
        async def stalled_fired() -> bool:
            n = await db.value(
                "SELECT count(*) FROM cron_fires WHERE app = %s AND at > %s",
                (frozen.app, released_at),
            )
            return int(n) > 0

        await wait_for(stalled_fired, 20, what="the stalled leader's fire", diagnose=workers.output)
        # ...and the successor's compare-and-set, on the cursor it read before, loses.
        await wait_for(
            lambda: _true(lost_passes(successor) > 0),
            20,
            what="the successor's lost compare-and-set",
            diagnose=workers.output,
        )
    finally:
        await lock.close()
        if stalled is not None:
            os.kill(stalled.pid, signal.SIGCONT)  # (a no-op if it is running already)
    assert stalled is not None

    # The successor fires on from the cursor the stalled leader left.
    await wait_for(
        lambda: fired_since(db, successor.app, released_at + 2 * SECOND),
        20,
        what="the successor's fires",
        diagnose=workers.output,
    )
    # the stalled leader, resumed, finds out it no longer leads
    await wait_for(
        lambda: _true("lost maintenance leadership" in stalled.text()),
        20,
        what="the stalled leader to step down",
        diagnose=workers.output,
    )
    for p in procs.values():
        assert await workers.stop(p.proc) == 0, workers.output()

    fires = await check_fires(db, workers)
    overlap = [
        t for t, (app, _, at) in fires.by_time.items() if app == stalled.app and at > elected_at
    ]
    assert overlap, "the stalled leader fired nothing once its successor led"
    assert fires.last >= released_at + 2 * SECOND


async def _true(value: bool) -> bool:
    return value
