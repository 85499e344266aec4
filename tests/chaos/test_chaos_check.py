"""The chaos soak's checker counts what it should: a hand-made history, broken on purpose."""

from __future__ import annotations

from typing import Any, LiteralString

import psycopg
import pytest
from bench import chaos_check

from tests.faults._contract import PROBES, Db

SPECS: LiteralString = """
INSERT INTO chaos.expected_specs VALUES ('flow', 'completed', 'a'), ('flow', 'rescued', 'r')
"""
# Jobs 101-104 produced; 101 and 102 completed by lease 1, 103 left available, 104 deleted
# (lost). Job 101 has its follow-up, job 102 none; one follow-up names an outcome never committed.
HISTORY: LiteralString = """
INSERT INTO wai.jobs (id, kind, queue) OVERRIDING SYSTEM VALUE
VALUES (101, 'flow', 'q'), (102, 'flow', 'q'), (103, 'flow', 'q'), (104, 'flow', 'q');
INSERT INTO chaos.produced (job_id, kind, mode, poison, queue)
SELECT id, 'flow', 'ok', '', 'q' FROM generate_series(101, 104) AS id;
UPDATE wai.jobs SET state = 'running', attempt = 1, run_lease = 1 WHERE id IN (101, 102);
UPDATE wai.jobs SET state = 'completed', finalized_at = now() WHERE id IN (101, 102);
DELETE FROM wai.jobs WHERE id = 104;
INSERT INTO wai.jobs (kind, queue, state, finalized_at, trigger_job_id, trigger_run_lease,
                      trigger_outcome, trigger_spec)
VALUES ('follow_up', 'f', 'completed', now(), 101, 1, 'completed', 'a'),
       ('follow_up', 'f', 'completed', now(), 102, 7, 'completed', 'a');
INSERT INTO runs (job_id, run_lease, pid) VALUES (101, 1, 10), (102, 1, 10), (102, 1, 11);
INSERT INTO finalizations (job_id, run_lease, state) VALUES (102, 1, 'completed');
INSERT INTO wai.outbox (job_id, run_lease, kind, outcome, job)
VALUES (101, 1, 'flow', 'rescued', '{}'), (103, 0, 'plain', 'rescued', '{}');
INSERT INTO wai.cron_schedules (name, expr, kind, queue, created_at, cursor_at)
VALUES ('tick', '* * * * * *', 'tick', 'q', '2026-01-01 00:00:00.5+00', now());
INSERT INTO wai.jobs (kind, queue, state, finalized_at, metadata)
SELECT 'tick', 'q', 'completed', now(),
       jsonb_build_object('wai.cron', jsonb_build_object('fire_time', f))
FROM unnest(ARRAY['2026-01-01T00:00:01+00:00', '2026-01-01T00:00:03+00:00',
                  '2026-01-01T00:00:03+00:00']) AS f;
"""


async def _run(url: str, query: LiteralString, params: Any = None) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(query, params)


async def test_the_checker_counts_each_kind_of_violation(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await _run(database_url, PROBES)
    await _run(database_url, chaos_check.SCHEMA)
    await _run(database_url, SPECS)
    await _run(database_url, HISTORY)
    await _run(database_url, chaos_check.RECORD_CRON_DUE, ("2026-01-01 00:00:03+00", "tick"))

    found = {v.invariant: v.count for v in await chaos_check.check(Db(database_url))}

    assert found == {
        "no job lost (every produced id in jobs or the DLQ)": 1,  # job 104
        "no attempt finalized twice (job, lease)": 1,  # job 102, lease 1
        "no job terminal twice": 0,
        "every committed outcome has its follow-ups": 1,  # job 102's spec a
        "no follow-up enqueued twice": 0,
        "no follow-up without its committed outcome": 1,  # job 102, lease 7
        "outbox: nothing left but poison closures' failed rows": 1,  # job 101's
        "outbox: orphan rows (no spec for the outcome)": 1,  # plain: shown, not counted
        "no job left non-terminal after the drain": 1,  # job 103
        "cron fired exactly once per due time": 2,  # 00:00:02 never, 00:00:03 twice
        "no attempt ran twice (runs per job, lease)": 1,  # job 102, lease 1
    }

    await chaos_check.print_summary(Db(database_url), [], {"kill_worker": 2})
    summary = capsys.readouterr().out
    assert "  flow   ok                -                  4        2       0" in summary
    assert "faults injected: kill_worker 2" in summary
