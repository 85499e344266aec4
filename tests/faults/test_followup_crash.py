"""SIGKILL of workers while they write follow-ups (SPEC §4.2, §4.3, §4.6, §12).

A completion and its follow-ups commit in one transaction, so a worker killed anywhere
in that transaction (in the guarded UPDATE, while the closures run, in the follow-up
INSERT, before COMMIT) leaves neither: PostgreSQL rolls the whole batch back with the
dead session, rescue closes the attempts, and a later attempt completes them with its
own follow-ups. A rescue leaves an outbox row in its own transaction, and an outbox
sweeper in any process holding the specs turns it into exactly one follow-up per spec.

The checks run in SQL over the lineage (``trigger_job_id``, ``trigger_run_lease``,
``trigger_outcome``, ``trigger_spec``) against the ``finalizations`` probe, which logs
exactly the attempt closings that committed.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

import wai
from tests.faults._contract import Db, Workers, check_contract, wait_for
from tests.faults._tasks import CHAIN_SPECS, Chain

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

TERMINAL = ("completed", "failed", "cancelled")

#: Per-trigger, per-spec: follow-ups of outcome 'completed' vs committed completions.
COMPLETED_MISMATCH = """
SELECT t.id, s.spec, c.committed, f.followups
FROM wai.jobs AS t
CROSS JOIN unnest(%(specs)s::text[]) AS s(spec)
CROSS JOIN LATERAL (
    SELECT count(*) AS committed FROM finalizations AS z
    WHERE z.job_id = t.id AND z.state = 'completed'
) AS c
CROSS JOIN LATERAL (
    SELECT count(*) AS followups FROM wai.jobs AS f
    WHERE f.trigger_job_id = t.id AND f.trigger_outcome = 'completed'
      AND f.trigger_spec = s.spec
      AND f.trigger_run_lease IN (SELECT z.run_lease FROM finalizations AS z
                                  WHERE z.job_id = t.id AND z.state = 'completed')
) AS f
WHERE t.kind = 'chain' AND (c.committed > 1 OR c.committed <> f.followups)
ORDER BY t.id
LIMIT 20
"""

#: Follow-ups of outcome 'completed' whose trigger attempt did not commit 'completed'.
ORPHAN_COMPLETED = """
SELECT f.id, f.trigger_job_id, f.trigger_run_lease, f.trigger_spec
FROM wai.jobs AS f
WHERE f.trigger_outcome = 'completed'
  AND NOT EXISTS (
      SELECT 1 FROM finalizations AS z
      WHERE z.job_id = f.trigger_job_id AND z.run_lease = f.trigger_run_lease
        AND z.state = 'completed')
ORDER BY f.id
LIMIT 20
"""

#: Attempts of triggers closed by rescue: a committed closing other than 'completed'
#: whose error entry (attempt = run lease: Chain never snoozes) carries 'rescued'.
RESCUED_ATTEMPTS = """
SELECT z.job_id, z.run_lease, e ->> 'rescued' AS reason
FROM finalizations AS z
JOIN wai.jobs AS t ON t.id = z.job_id AND t.kind = 'chain'
JOIN LATERAL jsonb_array_elements(t.errors) AS e
    ON (e ->> 'attempt')::bigint = z.run_lease AND e ? 'rescued'
WHERE z.state <> 'completed'
"""

#: Per rescued attempt and rescue spec: the follow-ups (exactly one expected).
RESCUED_MISMATCH = (
    "WITH rescued AS ("
    + RESCUED_ATTEMPTS
    + """)
SELECT r.job_id, r.run_lease, s.spec, count(f.id) AS followups
FROM rescued AS r
CROSS JOIN unnest(%(specs)s::text[]) AS s(spec)
LEFT JOIN wai.jobs AS f
    ON f.trigger_job_id = r.job_id AND f.trigger_run_lease = r.run_lease
   AND f.trigger_outcome = 'rescued' AND f.trigger_spec = s.spec
   AND f.args ->> 'reason' = r.reason
GROUP BY r.job_id, r.run_lease, s.spec
HAVING count(f.id) <> 1
ORDER BY r.job_id, r.run_lease
LIMIT 20
"""
)

#: Follow-ups of outcome 'rescued' whose trigger attempt was not closed by a rescue.
ORPHAN_RESCUED = (
    "WITH rescued AS ("
    + RESCUED_ATTEMPTS
    + """)
SELECT f.id, f.trigger_job_id, f.trigger_run_lease, f.trigger_spec
FROM wai.jobs AS f
WHERE f.trigger_outcome = 'rescued'
  AND NOT EXISTS (SELECT 1 FROM rescued AS r
                  WHERE r.job_id = f.trigger_job_id AND r.run_lease = f.trigger_run_lease)
ORDER BY f.id
LIMIT 20
"""
)

#: Attempts of triggers closed without success other than by rescue (none expected:
#: Chain handlers never fail, so only a follow-up failure would write one).
OTHER_FAILURES = """
SELECT z.job_id, z.run_lease, z.state, t.errors
FROM finalizations AS z
JOIN wai.jobs AS t ON t.id = z.job_id AND t.kind = 'chain'
WHERE z.state <> 'completed'
  AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(t.errors) AS e
                  WHERE (e ->> 'attempt')::bigint = z.run_lease AND e ? 'rescued')
LIMIT 20
"""

#: At most one follow-up per (trigger, run lease, outcome, spec) (the unique index's job).
DUPLICATES = """
SELECT trigger_job_id, trigger_run_lease, trigger_outcome, trigger_spec, count(*)
FROM wai.jobs WHERE trigger_job_id IS NOT NULL
GROUP BY 1, 2, 3, 4 HAVING count(*) > 1
LIMIT 20
"""

#: Follow-ups whose row disagrees with what their closure built from the trigger row.
MISBUILT = """
SELECT f.id, f.kind, f.queue, f.args, f.trigger_job_id, f.trigger_run_lease, f.trigger_spec
FROM wai.jobs AS f
WHERE f.trigger_job_id IS NOT NULL
  AND (f.kind <> 'chain_next' OR f.queue <> 'chain-next'
       OR (f.args ->> 'trigger')::bigint <> f.trigger_job_id
       OR (f.args ->> 'lease')::bigint <> f.trigger_run_lease
       OR f.args ->> 'via' <> f.trigger_spec
       OR (f.trigger_spec = 'chain-b') <> (f.priority = 3))
LIMIT 20
"""


async def check_lineage(db: Db, triggers: list[int]) -> tuple[list[int], int]:
    """Assert the follow-up invariants; returns every follow-up id and the rescued attempts."""
    problems: list[str] = []
    checks: list[tuple[str, Any, dict[str, Any] | None]] = [
        ("completions without exactly their follow-ups", COMPLETED_MISMATCH,
         {"specs": list(CHAIN_SPECS["completed"])}),
        ("follow-ups of an attempt that did not commit 'completed'", ORPHAN_COMPLETED, None),
        ("rescued attempts without exactly one follow-up per spec", RESCUED_MISMATCH,
         {"specs": list(CHAIN_SPECS["rescued"])}),
        ("rescue follow-ups of an attempt no rescue closed", ORPHAN_RESCUED, None),
        ("attempts closed without success other than by rescue", OTHER_FAILURES, None),
        ("duplicate follow-ups", DUPLICATES, None),
        ("follow-ups not built from their trigger", MISBUILT, None),
    ]  # fmt: skip
    for what, sql, params in checks:
        rows = await db.rows(sql, params)
        if rows:
            problems.append(f"{what}: {rows}")
    non_triggers = await db.rows(
        "SELECT id, kind FROM wai.jobs WHERE NOT (id = ANY(%s)) AND trigger_job_id IS NULL",
        (triggers,),
    )
    if non_triggers:
        problems.append(f"jobs that are neither a trigger nor a follow-up: {non_triggers[:20]}")
    assert not problems, "\n".join(problems)
    followups = [r[0] for r in await db.rows("SELECT id FROM wai.jobs WHERE trigger_job_id > 0")]
    rescued = len(await db.rows(RESCUED_ATTEMPTS))
    return followups, rescued


async def _settled(db: Db) -> bool:
    """Every job terminal, and no rescue of a trigger left to dispatch from the outbox."""
    # Rescued attempts come back with an exponential backoff; bring the due time of the
    # retries forward so that a job rescued several times does not keep the test waiting.
    await db.rows("UPDATE wai.jobs SET run_at = now() WHERE state = 'retryable'")
    live = await db.count("state NOT IN ('completed', 'failed', 'cancelled')")
    pending = await db.value("SELECT count(*) FROM wai.outbox WHERE kind = 'chain'")
    return live == 0 and pending == 0


#: The victim's sessions in a statement that is sleeping in the slow triggers.
WRITING = """
SELECT pid, left(query, 30) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = %s
  AND wait_event = 'PgSleep' AND xact_start IS NOT NULL AND query ILIKE %s
"""


async def _kill_at(
    db: Db, workers: Workers, victim: asyncio.subprocess.Process, app: str, phase: str, rng: Any
) -> str:
    """SIGKILL ``victim`` inside a finalize UPDATE, a follow-up INSERT, or at a random time.

    Returns what its sessions were doing when it died.
    """
    if phase == "random":
        await asyncio.sleep(rng.uniform(0.05, 1.5))
        await workers.kill(victim)
        rows = await db.rows(WRITING, (app, "%"))
        return f"random: {sorted(r[1] for r in rows) or 'not writing'}"
    pattern = "UPDATE%" if phase == "update" else "%INSERT INTO%"

    async def writing() -> list[tuple[Any, ...]]:
        return await db.rows(WRITING, (app, pattern))

    try:
        rows = await wait_for(writing, 20, what=f"a victim {phase}", interval=0.002)
    except AssertionError:  # the work ran out first: kill it anyway
        rows = []
    await workers.kill(victim)
    return f"{phase}: {sorted(r[1] for r in rows) or 'missed'}"


async def _sessions_gone(db: Db, app: str) -> None:
    """Wait until the dead worker's sessions have ended (and rolled back)."""

    async def gone() -> bool:
        n = await db.value(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s",
            (app,),
        )
        return int(n) == 0

    await wait_for(gone, 30, what=f"the sessions of the killed {app} to end")


async def test_sigkill_while_finalizing_follow_ups_commit_exactly_with_their_outcome(
    database_url: str, workers: Workers
) -> None:
    db = Db(database_url)
    await db.install_probes()
    app = "fault-chain"
    # every completion a victim writes costs 1 ms of server time in its guarded UPDATE,
    # and every follow-up it inserts 1 ms in its INSERT: the finalize transactions (and
    # the outbox sweeps of rescued attempts) stay open long enough to be killed in there
    await db.slow_finalize(app, 0.001)
    await db.slow_followups(app, 0.001)
    seed = time.time_ns()
    rng = random.Random(seed)
    triggers = await db.insert(wai.EnqueueRequest(Chain(n=i), queue="chain") for i in range(2000))
    rest = ["update", "insert", "random", "random"]
    rng.shuffle(rest)
    kills: list[str] = []
    queues = ("chain=30", "chain-next=30")
    for phase in ["update", "insert", *rest]:
        if await db.count("state NOT IN ('completed', 'failed', 'cancelled')") < 300:
            break
        victim = await workers.spawn_ready(db, database_url, *queues, app=app)
        kills.append(await _kill_at(db, workers, victim, app, phase, rng))
        await _sessions_gone(db, app)
    note = f"seed {seed}, kills {kills}"
    assert len(kills) >= 4, note
    assert any(k.startswith("update: [") for k in kills), note
    assert any(k.startswith("insert: [") for k in kills), note

    # the last worker (not slowed) drains everything; it also leads maintenance now,
    # rescues what the victims left running, and dispatches the rescue follow-ups
    drainer = await workers.spawn_ready(db, database_url, *queues, app="fault-drain")
    await wait_for(
        lambda: _settled(db), 150, what="every job and outbox row done", diagnose=workers.output
    )

    followups, rescued = await check_lineage(db, triggers)
    assert len(followups) == 2 * len(triggers) + rescued, note
    print(f"{note}; {rescued} rescued attempts, {len(followups)} follow-ups")
    assert rescued > 0, f"no attempt was rescued: the kills missed ({note})"
    await check_contract(db, [*triggers, *followups])
    assert await workers.stop(drainer) == 0, workers.output()


async def test_sigkill_mid_handler_repeatedly_one_rescue_follow_up_per_rescued_attempt(
    database_url: str, workers: Workers
) -> None:
    db = Db(database_url)
    await db.install_probes()
    # the leader rescues (and dispatches from the outbox, as any process holding the
    # specs may); the victims serve the triggers without maintenance
    leader = await workers.spawn_ready(db, database_url, "chain-next=10", app="fault-leader")

    async def leads() -> bool:
        return await db.leader_pid() == leader.pid

    await wait_for(leads, 20, what="the leader", diagnose=workers.output)
    # every job hangs in its first two attempts: each is killed twice mid-handler
    triggers = await db.insert(
        wai.EnqueueRequest(Chain(n=i, hang_attempts=2), queue="chain") for i in range(40)
    )
    victims: list[int] = []
    for lease in (1, 2):
        victim = await workers.spawn_ready(
            db, database_url, "chain=40", app=f"fault-victim{lease}", maintenance=False
        )
        victims.append(victim.pid)

        async def all_hanging(lease: int = lease) -> bool:
            n = await db.value(
                "SELECT count(DISTINCT job_id) FROM runs WHERE run_lease = %s", (lease,)
            )
            return int(n) == len(triggers)

        await wait_for(
            all_hanging, 40, what=f"every attempt {lease} to hang", diagnose=workers.output
        )
        await workers.kill(victim)
    final = await workers.spawn_ready(
        db, database_url, "chain=40", app="fault-final", maintenance=False
    )
    await wait_for(
        lambda: _settled(db), 60, what="every job and outbox row done", diagnose=workers.output
    )

    followups, rescued = await check_lineage(db, triggers)
    assert rescued == 2 * len(triggers)
    assert len(followups) == 4 * len(triggers)
    seen = await check_contract(db, [*triggers, *followups])
    for job_id in triggers:
        _, attempt, lease, errors = seen.jobs[job_id]
        assert (attempt, lease) == (3, 3)
        assert [e.get("rescued") for e in errors] == ["stale_heartbeat"] * 2
        assert seen.finals[job_id] == [(1, "retryable"), (2, "retryable"), (3, "completed")]
        assert [pid for _, pid in seen.runs[job_id]] == [*victims, final.pid]
    rows = await db.rows(
        "SELECT trigger_outcome, trigger_spec, trigger_run_lease, args ->> 'reason', count(*)"
        " FROM wai.jobs WHERE trigger_job_id IS NOT NULL GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3"
    )
    n = len(triggers)
    assert rows == [
        ("completed", "chain-a", 3, "", n),
        ("completed", "chain-b", 3, "", n),
        ("rescued", "chain-rescued", 1, "stale_heartbeat", n),
        ("rescued", "chain-rescued", 2, "stale_heartbeat", n),
    ]
    assert [await workers.stop(p) for p in (final, leader)] == [0, 0], workers.output()
