"""The database the browser tests look at: jobs in every state, dead letters, a schedule,
outbox rows, a follow-up chain three levels deep, runtime instances with drift, queues
with flow control, and hostile text (markup meant to run) in args, errors, tags, kinds,
queues and names.

Rows are forced into their states with plain SQL, as a worker or maintenance would leave
them (the helpers of tests/integration), so no worker runs during the tests. Kinds, times
and errors are then dressed as a real system's would be (the screenshots of docs/ui/ are
taken on this database, without the hostile rows).
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
    overdue: int = 0  # a job parked on a callback whose timeout passed
    timed_out: int = 0  # a job whose callback timed out: retryable


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


#: The kind of the plain jobs of each queue.
KINDS = {
    "q": "sync_account",
    "email": "send_email",
    "reports": "build_report",
    "images": "resize_image",
    "billing": "charge_invoice",
}

ERRORS = {
    "send_email": "smtplib.SMTPServerDisconnected: Connection unexpectedly closed",
    "build_report": "psycopg.errors.QueryCanceled: canceling statement due to statement timeout",
    "sync_account": "httpx.ReadTimeout: timed out after 30.0 s (api.example.com)",
    "resize_image": "PIL.UnidentifiedImageError: cannot identify image file 'upload-8812.heic'",
    "charge_invoice": "stripe.error.CardError: Your card was declined.",
}


#: The args of each kind's jobs, as SQL over the row (``id``).
ARGS: dict[str, LiteralString] = {
    "send_email": "jsonb_build_object('to', 'user' || id || '@example.com', 'template',"
    " 'newsletter-2026-12')",
    "build_report": "jsonb_build_object('account_id', 1000 + id, 'period', '2026-11')",
    "sync_account": "jsonb_build_object('account_id', 1000 + id, 'full', false)",
    "resize_image": "jsonb_build_object('upload_id', 'upl_' || (8000 + id), 'sizes',"
    " '[64, 256, 1024]'::jsonb)",
    "signup": '\'{"user_id": 4812, "email": "ada@example.com", "plan": "team"}\'::jsonb',
    "send_welcome": '\'{"user_id": 4812, "template": "welcome-v3"}\'::jsonb',
    "track_open": '\'{"user_id": 4812, "campaign": "welcome-v3"}\'::jsonb',
    "weekly_report": '\'{"user_id": 4812, "week": "2026-W49"}\'::jsonb',
    "audit_log": '\'{"user_id": 4812, "event": "signup"}\'::jsonb',
}


async def _dress(client: wai.AsyncClient) -> None:
    """Kinds by queue, args, creation times spread over the last two hours, error texts."""
    for queue, kind in KINDS.items():
        await _sql(
            client,
            "UPDATE wai.jobs SET kind = %s WHERE kind = 'work' AND queue = %s",
            (kind, queue),
        )
        await _sql(
            client,
            "UPDATE wai.dlq SET job = jsonb_set(job, '{kind}', to_jsonb(%s::text))"
            " WHERE job->>'kind' = 'work' AND job->>'queue' = %s",
            (kind, queue),
        )
    for kind, args in ARGS.items():
        await _sql(
            client,
            "UPDATE wai.jobs SET args = " + args + " WHERE kind = %s",
            (kind,),
        )
    await _sql(
        client,
        "UPDATE wai.dlq SET job = jsonb_set(job, '{args}', jsonb_build_object('invoice', 'in_'"
        " || (3000 + job_id), 'amount_cents', 4900)) WHERE job->>'kind' = 'charge_invoice'",
    )
    await _sql(
        client,
        "UPDATE wai.jobs SET metadata = jsonb_build_object('request_id', 'req_' ||"
        " substr(md5(id::text), 1, 12)) WHERE queue IN ('signup', 'email') AND metadata = '{}'",
    )
    # the oldest job two hours ago, then one every 97 seconds, in id order (a trigger is older)
    await _sql(
        client,
        "UPDATE wai.jobs SET created_at = now() - make_interval(secs => ((SELECT max(id) FROM"
        " wai.jobs) - id) * 97 + 20), run_at = CASE WHEN state IN ('available', 'completed',"
        " 'failed', 'cancelled') THEN now() - make_interval(secs => ((SELECT max(id) FROM"
        " wai.jobs) - id) * 97) ELSE run_at END",
    )
    await _sql(
        client,
        "UPDATE wai.jobs SET attempted_at = run_at + interval '2 seconds'"
        " WHERE attempted_at IS NOT NULL AND state <> 'running'",
    )
    await _sql(
        client,
        "UPDATE wai.jobs SET finalized_at = attempted_at + interval '3 seconds'"
        " WHERE finalized_at IS NOT NULL",
    )
    # the placeholder errors of the helpers ("boom") become each kind's own, at its time
    for kind, error in ERRORS.items():
        await _sql(
            client,
            "UPDATE wai.jobs AS j SET errors = (SELECT jsonb_agg(CASE WHEN e->>'error' = 'boom'"
            " THEN e || jsonb_build_object('error', %s::text, 'at', j.attempted_at +"
            " make_interval(secs => 3 - 10 * (j.attempt - (e->>'attempt')::int))) ELSE e END)"
            " FROM jsonb_array_elements(j.errors) AS e) WHERE kind = %s AND errors <> '[]'",
            (error, kind),
        )
        await _sql(
            client,
            "UPDATE wai.dlq SET job = jsonb_set(job, '{errors}', (SELECT jsonb_agg(CASE WHEN"
            " e->>'error' = 'boom' THEN e || jsonb_build_object('error', %s::text, 'at',"
            " job->'attempted_at') ELSE e END)"
            " FROM jsonb_array_elements(job->'errors') AS e))"
            " WHERE job->>'kind' = %s AND job->'errors' <> '[]'",
            (error, kind),
        )


async def seed(url: str, *, hostile: bool = True) -> World:
    """Fill the database at ``url`` (``hostile=False``: without the rows of hostile text)."""
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
        for state in ["available"] * 9 + ["running"] * 3 + ["retryable"] * 2 + ["scheduled"]:
            await make(client, state, queue="images")
        for state in ["completed"] * 6 + ["cancelled"]:
            await make(client, state, queue="images")

    async with wai.AsyncClient(url) as client:
        if hostile:
            world.xss_job = await _hostile_job(client)
        await _chain(client, world, hostile)
        await _dead_letters(client, world, hostile)
        await _outbox(client, world)
        await _schedules(client, world, hostile)
        await _instances(client)
        await _history(client)
        await _callbacks(client, world, hostile)
        await _flow(client)
        await _dress(client)
    return world


async def _history(client: wai.AsyncClient) -> None:
    """An hour of throughput counts and depth samples, as workers and the leader write them."""
    await _sql(
        client,
        "INSERT INTO wai.throughput (minute, queue, kind, event, n)"
        " SELECT date_trunc('minute', now()) - make_interval(mins => g), 'email', 'work',"
        "        e.event, e.base + (g * 7) % e.spread"
        " FROM generate_series(0, 59) AS g,"
        "      (VALUES ('completed', 40, 23), ('retried', 3, 5), ('failed', 0, 3))"
        "      AS e(event, base, spread)",
    )
    await _sql(
        client,
        "INSERT INTO wai.queue_depth (at, queue, counts, oldest_available_lag)"
        " SELECT date_trunc('minute', now()) - make_interval(mins => g), q.name,"
        "        jsonb_build_object('available', 5 + (g * 3) % 11, 'running', 2 + g % 3,"
        "                           'scheduled', 1),"
        "        (g % 5) * 1.5"
        " FROM generate_series(1, 59) AS g, (VALUES ('email'), ('images')) AS q(name)",
    )


async def _callbacks(client: wai.AsyncClient, world: World, hostile: bool) -> None:
    """A parked job whose callback is overdue (its kind hostile text), and one whose
    callback timed out: maintenance made it retryable, its retry due in a minute."""
    overdue = await make(client, "waiting_external", queue="email")
    await _sql(
        client,
        "UPDATE wai.jobs SET callback_timeout_at = now() - interval '2 minutes', kind = %s"
        " WHERE id = %s",
        (XSS_IMG if hostile else "send_email", overdue.id),
    )
    timed_out = await make(client, "retryable", queue="email")
    await _sql(
        client,
        "UPDATE wai.jobs SET run_at = now() + interval '1 minute', errors = jsonb_build_array("
        "jsonb_build_object('error', 'callback timed out', 'attempt', 1, 'at',"
        " now() - interval '4 minutes', 'rescued', 'callback_timeout')) WHERE id = %s",
        (timed_out.id,),
    )
    world.overdue, world.timed_out = overdue.id, timed_out.id


async def _flow(client: wai.AsyncClient) -> None:
    """Flow control: limits on reports, and a rate limit of its build_report kind; on
    images, a rate limit of its resize_image kind and three jobs of one ordering key, the
    first running (its key's turn taken, as a claim leaves it), two waiting their turn."""
    await client.set_queue_limits(
        "reports", rate_limit=wai.RateLimit(50, per=1.0, burst=10), global_concurrency=5
    )
    await client.set_kind_rate_limit("reports", "build_report", wai.RateLimit(5, per=60.0, burst=2))
    await client.set_kind_rate_limit("images", "resize_image", wai.RateLimit(20))
    ids = [
        row[0]
        for row in await fetch(
            client,
            "SELECT id FROM wai.jobs WHERE queue = 'images' AND state = 'available'"
            " ORDER BY id LIMIT 3",
        )
    ]
    await _sql(client, "UPDATE wai.jobs SET ordering_key = 'album-7' WHERE id = ANY(%s)", (ids,))
    await _sql(
        client,
        "UPDATE wai.jobs SET state = 'running', attempt = 1, run_lease = 1,"
        " attempted_at = now(), heartbeat_at = now(), deadline_at = now() + interval '1 hour'"
        " WHERE id = %s",
        (ids[0],),
    )
    await _sql(
        client,
        "INSERT INTO wai.key_turns (queue, ordering_key, job_id) VALUES ('images', 'album-7', %s)",
        (ids[0],),
    )


async def _hostile_job(client: wai.AsyncClient) -> int:
    """A failed job with hostile text everywhere a user's data shows."""
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
    return xss.id


async def _chain(client: wai.AsyncClient, world: World, hostile: bool) -> None:
    """A follow-up chain: signup → welcome email → open tracking → report; plus a sibling."""
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
        (f"no process holds the spec {XSS_IMG if hostile else 'notify_owner'}", owed),
    )
    world.chain = [root.id, child.id, grandchild.id, great.id]
    world.sibling = sibling.id
    world.owed_outbox = owed


async def _dead_letters(client: wai.AsyncClient, world: World, hostile: bool) -> None:
    reasons = ["max_attempts_exhausted", "terminal_error", "max_attempts_exhausted", "manual"]
    for n, reason in enumerate(reasons):
        entry = await dead(client, queue="billing", tags=(f"invoice-{n}",))
        await _sql(
            client,
            "UPDATE wai.dlq SET reason = %s, dlq_at = now() - make_interval(mins => %s)"
            " WHERE job_id = %s",
            (reason, 40 - 9 * n, entry.id),
        )
        world.dead.append(entry.id)
    if hostile:
        entry = await dead(client, queue="billing", tags=(XSS_IMG,))
        errors = [{"error": TRACEBACK, "attempt": 3, "at": "2026-01-01T00:00:00Z"}]
        await _sql(
            client,
            "UPDATE wai.dlq SET job = jsonb_set(jsonb_set(job, '{kind}', to_jsonb(%s::text)),"
            " '{errors}', %s::jsonb) WHERE job_id = %s",
            (XSS_IMG, json.dumps(errors), entry.id),
        )
        world.xss_dead = entry.id


async def _outbox(client: wai.AsyncClient, world: World) -> None:
    """Pending rows, and one failed with a traceback for its last error."""
    for _ in range(2):
        row = await make(client, "running", queue="reports")
        await client.cancel(row.id)
    row = await make(client, "running", queue="reports")
    await client.cancel(row.id)
    [(failed_id,)] = await fetch(client, "SELECT id FROM wai.outbox WHERE job_id = %s", (row.id,))
    await _sql(
        client,
        "UPDATE wai.outbox SET failed_at = now(), attempts = 8, last_error = %s WHERE id = %s",
        (TRACEBACK, failed_id),
    )
    world.outbox_failed = failed_id


async def _schedules(client: wai.AsyncClient, world: World, hostile: bool) -> None:
    client.periodic(world.schedule, "0 3 * * *", Work(n=1), queue="reports")
    client.periodic("cleanup/hourly", "@hourly", Work(n=2), queue="q")
    await client.upsert_cron()
    if hostile:
        await _sql(
            client,
            "INSERT INTO wai.cron_schedules (name, expr, timezone, kind, queue, args,"
            " missed_fire_policy, cursor_at) VALUES (%s, '*/5 * * * *', 'UTC', %s, 'q',"
            " %s::jsonb, 'coalesce', now())",
            (XSS_SCRIPT, XSS_IMG, json.dumps({"x": XSS_SVG})),
        )


async def _instances(client: wai.AsyncClient) -> None:
    """Runtime instances: a leader, a worker, and drift between their specs."""
    for instance, leader, specs in [
        ("web-1:4012:a1b2", True, [("signup", "completed", "welcome")]),
        ("web-2:5120:c3d4", False, [("signup", "completed", "welcome_v2")]),
    ]:
        host, pid, _ = instance.split(":")
        await _sql(
            client,
            "INSERT INTO wai.runtime_instances (instance_id, hostname, pid, version, role,"
            " queues, concurrency, in_flight, leader, specs) VALUES (%s, %s, %s, '0.1.0',"
            ' \'worker+maintenance\', \'{"email": 8, "images": 4, "reports": 2}\', 14, 3,'
            " %s, %s::jsonb)",
            (
                instance,
                host,
                int(pid),
                leader,
                json.dumps([{"kind": k, "outcome": o, "spec": s} for k, o, s in specs]),
            ),
        )
