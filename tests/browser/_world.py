"""The database the browser tests look at: jobs in every state, dead letters, a schedule,
outbox rows, a follow-up chain three levels deep, runtime instances with drift, and
hostile text (markup meant to run) in args, errors, tags, kinds, queues and names.

Rows are forced into their states with plain SQL, as a worker or maintenance would leave
them (the helpers of tests/integration), so no worker runs during the tests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, LiteralString

import wai
from tests.integration._helpers import Work, fetch
from tests.integration.test_admin import STATES, make
from tests.integration.test_dlq import dead

#: Markup that would run if the UI ever parsed data as HTML: each sets window.__xss.
XSS_IMG = "<img src=x onerror=window.__xss=1>"
XSS_SCRIPT = '"><script>window.__xss=1</script>'
XSS_SVG = "<svg onload=window.__xss=1>"

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "app/tasks.py", line 42, in send_report\n'
    "    render(report)\n"
    f"ValueError: bad template {XSS_SCRIPT}"
)


@dataclass
class World:
    """The ids the tests look for."""

    by_state: dict[str, int] = field(default_factory=dict)
    email_ids: list[int] = field(default_factory=list)  # oldest first
    xss_job: int = 0
    chain: list[int] = field(default_factory=list)  # root, child, grandchild, great-grandchild
    sibling: int = 0  # a second follow-up of chain[1]
    owed_outbox: int = 0  # the outbox row the last of the chain owes
    dead: list[int] = field(default_factory=list)
    xss_dead: int = 0
    outbox_failed: int = 0
    schedule: str = "nightly-report"


async def _sql(client: wai.AsyncClient, query: LiteralString, params: Any = None) -> None:
    await fetch(client, query, params)


async def _follow_up(
    client: wai.AsyncClient, child: wai.JobRow, parent: int, outcome: str, spec: str
) -> None:
    await _sql(
        client,
        "UPDATE wai.jobs SET trigger_job_id = %s, trigger_run_lease = 1, trigger_outcome = %s,"
        " trigger_spec = %s WHERE id = %s",
        (parent, outcome, spec, child.id),
    )


async def seed(url: str) -> World:
    """Fill the database at ``url``."""
    world = World()
    async with wai.AsyncClient(url) as client:
        for state in STATES:
            world.by_state[state] = (await make(client, state)).id
        for n in range(14):
            row = await client.insert(Work(n=n), queue="email", tags=["newsletter"])
            world.email_ids.append(row.id)
        for state in ("running", "running", "retryable", "scheduled", "completed", "failed"):
            await make(client, state, queue="reports")
        await make(client, "running", queue="email")

        # hostile text everywhere a user's data shows
        xss = await client.insert(
            {"html": XSS_IMG, "quote": XSS_SCRIPT, "svg": XSS_SVG},
            kind="hostile",
            queue="xss",
            tags=[XSS_IMG, XSS_SCRIPT],
            metadata={"note": XSS_SCRIPT},
        )
        errors = [
            {"error": f"first try {XSS_IMG}", "attempt": 1, "at": "2026-01-01T00:00:00+00:00"},
            {
                "error": TRACEBACK,
                "attempt": 2,
                "at": "2026-01-01T00:05:00+00:00",
                "rescued": f"deadline {XSS_SVG}",
            },
            {
                "error": TRACEBACK,
                "attempt": 3,
                "at": "2026-01-01T00:10:00+00:00",
                "terminal": True,
            },
        ]
        await _sql(
            client,
            "UPDATE wai.jobs SET kind = %s, queue = %s, state = 'failed', attempt = 3,"
            " max_attempts = 3, run_lease = 3, attempted_at = now(), finalized_at = now(),"
            " errors = %s::jsonb WHERE id = %s",
            (XSS_IMG, XSS_SCRIPT, json.dumps(errors), xss.id),
        )
        world.xss_job = xss.id

        # a follow-up chain: signup → welcome email → open tracking → report; plus a sibling
        root = await make(client, "completed", queue="signup")
        child = await make(client, "completed", queue="signup")
        grandchild = await make(client, "completed", queue="email")
        great = await make(client, "running", queue="email")
        sibling = await make(client, "failed", queue="email")
        await _follow_up(client, child, root.id, "completed", "welcome")
        await _follow_up(client, grandchild, child.id, "completed", "track_open")
        await _follow_up(client, great, grandchild.id, "completed", "report")
        await _follow_up(client, sibling, child.id, "completed", "audit")
        for row, kind in [
            (root, "signup"),
            (child, "send_welcome"),
            (grandchild, "track_open"),
            (great, "weekly_report"),
            (sibling, "audit_log"),
        ]:
            await _sql(client, "UPDATE wai.jobs SET kind = %s WHERE id = %s", (kind, row.id))
        await client.cancel(great.id)  # a bare client: its cancel follow-ups wait in the outbox
        [(owed,)] = await fetch(client, "SELECT id FROM wai.outbox WHERE job_id = %s", (great.id,))
        await _sql(
            client,
            "UPDATE wai.outbox SET attempts = 3, last_error = %s WHERE id = %s",
            (f"no process holds the spec {XSS_IMG}", owed),
        )
        world.chain = [root.id, child.id, grandchild.id, great.id]
        world.sibling = sibling.id
        world.owed_outbox = owed

        # dead letters
        for n in range(4):
            world.dead.append((await dead(client, queue="billing", tags=(f"invoice-{n}",))).id)
        hostile = await dead(client, queue="billing", tags=(XSS_IMG,))
        await _sql(
            client,
            "UPDATE wai.dlq SET job = jsonb_set(job, '{errors}', %s::jsonb) WHERE job_id = %s",
            (
                json.dumps([{"error": TRACEBACK, "attempt": 3, "at": "2026-01-01T00:00:00Z"}]),
                hostile.id,
            ),
        )
        world.xss_dead = hostile.id

        # the outbox: pending rows, one failed with a hostile error
        for _ in range(2):
            row = await make(client, "running", queue="reports")
            await client.cancel(row.id)
        row = await make(client, "running", queue="reports")
        await client.cancel(row.id)
        [(failed_id,)] = await fetch(
            client, "SELECT id FROM wai.outbox WHERE job_id = %s", (row.id,)
        )
        await _sql(
            client,
            "UPDATE wai.outbox SET failed_at = now(), attempts = 8, last_error = %s WHERE id = %s",
            (TRACEBACK, failed_id),
        )
        world.outbox_failed = failed_id

        # schedules
        client.periodic(world.schedule, "0 3 * * *", Work(n=1), queue="reports")
        client.periodic("cleanup/hourly", "@hourly", Work(n=2), queue="q")
        await client.upsert_cron()
        await _sql(
            client,
            "INSERT INTO wai.cron_schedules (name, expr, timezone, kind, queue, args,"
            " missed_fire_policy, cursor_at) VALUES (%s, '*/5 * * * *', 'UTC', %s, 'q', %s::jsonb,"
            " 'coalesce', now())",
            (XSS_SCRIPT, XSS_IMG, json.dumps({"x": XSS_SVG})),
        )

        # runtime instances: a leader, a worker, and drift between their specs
        for instance, leader, specs in [
            ("web-1:4012:a1b2", True, [("signup", "completed", "welcome")]),
            ("web-2:5120:c3d4", False, [("signup", "completed", "welcome_v2")]),
        ]:
            host, pid, _ = instance.split(":")
            await _sql(
                client,
                "INSERT INTO wai.runtime_instances (instance_id, hostname, pid, version, role,"
                " queues, concurrency, in_flight, leader, specs) VALUES (%s, %s, %s, '0.1.0',"
                " 'worker+maintenance', '{\"email\": 8, \"reports\": 2}', 10, 3, %s, %s::jsonb)",
                (
                    instance,
                    host,
                    int(pid),
                    leader,
                    json.dumps([{"kind": k, "outcome": o, "spec": s} for k, o, s in specs]),
                ),
            )
    return world
