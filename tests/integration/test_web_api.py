"""The admin HTTP API (``wai.web.create_app``) on a real database, through httpx's ASGI transport.

Every endpoint on real rows; filters and page walks; each mutation with the token,
without it, with a wrong one and in read-only mode (a refused request changes no
row); hostile parameters and bodies (a 4xx JSON error, never a 5xx, nothing
written); the app mounted under a prefix; the token never in an answer or a log.
Each success is checked against the response schema the OpenAPI document declares,
with every model object closed, so an undocumented field fails too.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import jsonschema
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import wai
from tests.factories import HOSTILE
from tests.integration._helpers import Work, fetch
from tests.integration.test_admin import STATES, keyed, make
from tests.integration.test_callbacks import expire, parked
from tests.integration.test_dlq import dead
from wai.maintenance import DepthSampler, Rescuer
from wai.web import _api_jobs as api_jobs
from wai.web import create_app
from wai.web._openapi import document
from wai.web._routes import ROUTES
from wai.web._serve import server_app
from wai.worker._throughput import ThroughputRecorder

pytestmark = pytest.mark.timeout(120)

TOKEN = "tok-3f9a1c0e7d4b4e2a9c51-admin"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BASE = "http://wai.test"
API = "/api/v1"
UNREACHABLE = "postgresql://postgres@127.0.0.1:1/nowhere"

DOC = document(ROUTES, "")


def _strict_components() -> dict[str, Any]:
    """The document's components, each model object closed."""
    found = copy.deepcopy(DOC["components"])
    for schema in found["schemas"].values():
        if schema.get("type") == "object" and "properties" in schema:
            schema["additionalProperties"] = False
    return found


_COMPONENTS = _strict_components()
_OPERATIONS = {
    (method.upper(), path): op for path, ops in DOC["paths"].items() for method, op in ops.items()
}


def conforms(response: httpx.Response, method: str, path: str) -> Any:
    """Assert a 200 JSON answer, with the API's headers, matching the operation's schema.

    ``path`` is the documented one (``/jobs/{job_id}``), under ``/api/v1``.
    """
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"
    assert TOKEN not in response.text
    body = response.json()
    op = _OPERATIONS[(method, API + path)]
    schema = op["responses"]["200"]["content"]["application/json"]["schema"]
    jsonschema.validate(body, {**schema, "components": _COMPONENTS})
    return body


def refused(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """Assert a JSON error answer with ``status`` (and ``code``); returns its error object."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"
    assert TOKEN not in response.text
    body = response.json()
    jsonschema.validate(body, DOC["components"]["schemas"]["Error"])
    if code is not None:
        assert body["error"]["code"] == code, body
    return body["error"]


def http(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)


@pytest.fixture
async def api(aclient: wai.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    """The API of ``aclient`` with mutations enabled by :data:`TOKEN`."""
    async with http(create_app(aclient, token=TOKEN, read_only=False)) as client:
        yield client


TABLES = ("jobs", "dlq", "queues", "kind_limits", "cron_schedules", "outbox", "runtime_instances")


async def snapshot(client: wai.AsyncClient) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the tables an action could touch, as JSON text."""
    return {
        table: await fetch(
            client,
            f"SELECT to_jsonb(t)::text FROM wai.{table} t ORDER BY 1",  # type: ignore[arg-type]
        )
        for table in TABLES
    }


@dataclass
class World:
    """One target of every mutation, each in a state where the mutation would succeed."""

    running: wai.JobRow
    failed: wai.JobRow
    dead: wai.JobRow
    outbox_id: int


async def world_of(client: wai.AsyncClient) -> World:
    running = await make(client, "running")
    failed = await make(client, "failed")
    await make(client, "available")
    entry = await dead(client, queue="dq")
    await client.cancel((await make(client, "running", queue="other")).id)  # an outbox row
    [(outbox_id,)] = await fetch(client, "SELECT id FROM wai.outbox")
    client.periodic("nightly", "0 3 * * *", Work(), queue="q")
    await client.upsert_cron()
    return World(running=running, failed=failed, dead=entry, outbox_id=outbox_id)


@pytest.fixture
async def world(aclient: wai.AsyncClient) -> World:
    return await world_of(aclient)


def mutations(w: World) -> list[tuple[str, str, str, Any]]:
    """(operationId, method, path under /api/v1, JSON body) of each mutation on ``w``."""
    return [
        ("cancelJob", "POST", f"/jobs/{w.running.id}/cancel", None),
        ("retryJob", "POST", f"/jobs/{w.failed.id}/retry", None),
        ("pauseQueue", "POST", "/queues/q/pause", None),
        ("resumeQueue", "POST", "/queues/fresh/resume", None),
        ("drainQueue", "POST", "/queues/q/drain", None),
        (
            "setQueueLimits",
            "PUT",
            "/queues/q/limits",
            {"rate_limit": {"limit": 50, "per": 1.0, "burst": 10}, "global_concurrency": 5},
        ),
        (
            "setKindRateLimit",
            "PUT",
            "/queues/q/kinds/work/limit",
            {"rate_limit": {"limit": 10, "per": 60.0, "burst": 2}},
        ),
        ("retryDlqEntry", "POST", f"/dlq/{w.dead.id}/retry", {"priority": 1}),
        ("bulkRetryDlq", "POST", "/dlq/retry", {"all": True}),
        ("purgeDlqEntry", "DELETE", f"/dlq/{w.dead.id}", None),
        ("bulkPurgeDlq", "POST", "/dlq/purge", {"all": True}),
        ("pauseCron", "POST", "/cron/nightly/pause", None),
        ("resumeCron", "POST", "/cron/nightly/resume", None),
        ("triggerCron", "POST", "/cron/nightly/trigger", None),
        ("deleteCron", "DELETE", "/cron/nightly", None),
        ("retryOutboxRow", "POST", f"/outbox/{w.outbox_id}/retry", None),
        ("discardOutboxRow", "DELETE", f"/outbox/{w.outbox_id}", None),
    ]


def test_the_mutation_list_covers_every_mutating_route() -> None:
    row: Any = type("Row", (), {"id": 1})()
    w = World(running=row, failed=row, dead=row, outbox_id=1)
    listed = {op for op, *_ in mutations(w)}
    assert listed == {e.operation_id for e in ROUTES if e.mutates}


# -- authorization ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Bearer {TOKEN[:-1]}"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer "},
        {"X-Token": TOKEN},
    ],
    ids=[
        "none",
        "wrong",
        "longer",
        "shorter",
        "basic-scheme",
        "no-scheme",
        "empty",
        "blank",
        "other-header",
    ],
)
async def test_mutations_without_the_token_are_refused_and_change_nothing(
    aclient: wai.AsyncClient, world: World, api: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    before = await snapshot(aclient)
    for _op, method, path, body in mutations(world):
        response = await api.request(method, API + path, json=body, headers=headers)
        refused(response, 401, "unauthorized")
        assert response.headers["www-authenticate"] == "Bearer"
    assert await snapshot(aclient) == before


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no-token", "with-token"])
async def test_read_only_refuses_every_mutation_whatever_the_token(
    aclient: wai.AsyncClient, world: World, token: str | None
) -> None:
    before = await snapshot(aclient)
    async with http(create_app(aclient, token=token)) as api:  # read_only=True by default
        for _op, method, path, body in mutations(world):
            response = await api.request(method, API + path, json=body, headers=AUTH)
            refused(response, 403, "read_only")
        conforms(await api.get(API + "/jobs"), "GET", "/jobs")  # reads still answer
    assert await snapshot(aclient) == before


async def test_each_mutation_with_the_token_succeeds(
    aclient: wai.AsyncClient, world: World, api: httpx.AsyncClient
) -> None:
    for op, method, path, body in mutations(world):
        if op == "purgeDlqEntry":  # the bulk retry before it took the entry out of the DLQ
            second = await dead(aclient, queue="dq")
            path = f"/dlq/{second.id}"
        response = await api.request(method, API + path, json=body, headers=AUTH)
        documented = next(e for e in ROUTES if e.operation_id == op).path
        conforms(response, method, documented)


async def test_the_scheme_is_case_insensitive(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    row = await make(aclient, "available")
    response = await api.post(
        f"{API}/jobs/{row.id}/cancel", headers={"Authorization": f"bearer  {TOKEN} "}
    )
    assert conforms(response, "POST", "/jobs/{job_id}/cancel")["state"] == "cancelled"


def test_mutations_are_never_open(aclient: wai.AsyncClient) -> None:
    with pytest.raises(ValueError, match="needs a token"):
        create_app(aclient, read_only=False)
    for token in ("", "   "):
        with pytest.raises(ValueError, match="non-empty"):
            create_app(aclient, token=token, read_only=False)


async def test_the_token_is_in_no_answer_and_no_log(
    aclient: wai.AsyncClient,
    world: World,
    api: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    answers: list[httpx.Response] = []
    for headers in ({}, {"Authorization": "Bearer nope"}, AUTH):
        answers += [
            await api.get(API + e.path, headers=headers) for e in ROUTES if "{" not in e.path
        ]
        for _op, method, path, body in mutations(world):
            answers.append(await api.request(method, API + path, json=body, headers=headers))
    answers.append(await api.get("/nowhere", headers=AUTH))
    answers.append(await api.put(f"{API}/jobs", headers=AUTH))
    assert {r.status_code for r in answers} >= {200, 401, 404, 405}
    for response in answers:
        assert response.status_code < 500, response.text
        assert TOKEN not in response.text
        assert all(TOKEN not in value for value in response.headers.values())
    assert TOKEN not in caplog.text


# -- jobs -------------------------------------------------------------------------------------


async def test_jobs_filters_and_pages(aclient: wai.AsyncClient, api: httpx.AsyncClient) -> None:
    rows = {state: await make(aclient, state) for state in STATES}
    other = await aclient.insert(Work(n=1), queue="other", tags=["blue"])
    trigger = rows["completed"]
    await fetch(
        aclient,
        "UPDATE wai.jobs SET trigger_job_id = %s, trigger_run_lease = 1,"
        " trigger_outcome = 'completed', trigger_spec = 'welcome' WHERE id = %s",
        (trigger.id, other.id),
    )
    every = sorted([r.id for r in rows.values()] + [other.id], reverse=True)

    async def ids(**params: Any) -> list[int]:
        body = conforms(await api.get(f"{API}/jobs", params=params), "GET", "/jobs")
        return [item["id"] for item in body["items"]]

    assert await ids() == every
    for state, row in rows.items():
        also = [other.id] if state == "available" else []
        assert await ids(state=state) == sorted([row.id, *also], reverse=True)
        assert await ids(state=state, queue="q") == [row.id]
    assert await ids(queue="other") == [other.id]
    assert await ids(tag="blue") == [other.id]
    assert await ids(kind="work") == every
    assert await ids(kind="nope") == []
    assert await ids(queue=HOSTILE.replace(" ", "_").replace("'", "").replace(";", "")) == []
    assert await ids(trigger_job_id=trigger.id) == [other.id]
    [follow] = conforms(
        await api.get(f"{API}/jobs", params={"trigger_job_id": trigger.id}), "GET", "/jobs"
    )["items"]
    assert follow["trigger"] == {
        "job_id": trigger.id,
        "run_lease": 1,
        "outcome": "completed",
        "spec": "welcome",
    }

    walked: list[int] = []
    params: dict[str, Any] = {"limit": 4}
    pages = 0
    while True:
        body = conforms(await api.get(f"{API}/jobs", params=params), "GET", "/jobs")
        walked += [item["id"] for item in body["items"]]
        pages += 1
        if body["next_before_id"] is None:
            break
        assert body["next_before_id"] == walked[-1]
        params["before_id"] = body["next_before_id"]
    assert walked == every
    assert pages == 3  # 9 jobs by 4: the last page is not empty
    exact = conforms(await api.get(f"{API}/jobs", params={"limit": 9}), "GET", "/jobs")
    assert exact["next_before_id"] is None  # a page that holds the rest says there is no more


async def test_jobs_by_time_range_and_search(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    rows = [await aclient.insert(Work(n=n), kind=kind) for n, kind in enumerate(
        ["send_email", "send_email", "charge_card", "half_off", "send_email"]
    )]  # fmt: skip
    # a kind no client accepts, as another producer may have written it
    await fetch(aclient, "UPDATE wai.jobs SET kind = '50%%_off' WHERE id = %s", (rows[3].id,))
    await fetch(
        aclient,
        "UPDATE wai.jobs SET created_at = '2026-05-01T12:00:00Z'::timestamptz"
        " + (id - %s) * interval '1 minute'",
        (rows[0].id,),
    )

    async def ids(**params: Any) -> list[int]:
        body = conforms(await api.get(f"{API}/jobs", params=params), "GET", "/jobs")
        return [item["id"] for item in body["items"]]

    r = [row.id for row in rows]
    assert await ids(created_after="2026-05-01T12:02:00Z") == [r[4], r[3], r[2]]
    assert await ids(created_before="2026-05-01T12:02:00+00:00") == [r[1], r[0]]
    assert await ids(
        created_after="2026-05-01T14:01:00+02:00", created_before="2026-05-01T12:03:00Z"
    ) == [r[2], r[1]]  # fmt: skip
    assert await ids(search="EMAIL") == [r[4], r[1], r[0]]
    assert await ids(search="%") == [r[3]]
    assert await ids(search="_") == [r[4], r[3], r[2], r[1], r[0]]
    assert await ids(search=f"#{r[2]}") == [r[2]]
    assert await ids(search="email", created_after="2026-05-01T12:01:00Z") == [r[4], r[1]]
    for params, message in [
        ({"created_after": "2026-05-01T12:00:00"}, "needs a UTC offset"),
        ({"created_before": "yesterday"}, "ISO 8601"),
        (
            {"created_after": "2026-05-02T00:00:00Z", "created_before": "2026-05-01T00:00:00Z"},
            "must be earlier than created_before",
        ),
        ({"search": "a\x00b"}, "NUL"),
        ({"search": "x" * 201}, "1 to 200 characters"),
        ({"search": ""}, "1 to 200 characters"),
    ]:
        error = refused(await api.get(f"{API}/jobs", params=params), 400, "bad_request")
        assert message in error["message"], error


async def test_a_search_looks_through_a_bounded_run_of_ids_per_page(
    aclient: wai.AsyncClient, api: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api_jobs, "SCAN_WINDOW", 5)
    rows = await aclient.insert_many(
        wai.EnqueueRequest(Work(n=n), kind="match" if n in (3, 4, 17, 18, 19, 38) else "other")
        for n in range(40)
    )
    r = [row.id for row in rows]
    await fetch(  # a purged stretch: the walk jumps it instead of paging through it
        aclient, "DELETE FROM wai.jobs WHERE id BETWEEN %s AND %s", (r[20], r[34])
    )
    matching = [r[n] for n in (38, 19, 18, 17, 4, 3)]

    async def walk(**params: Any) -> tuple[list[list[int]], list[int | None]]:
        pages: list[list[int]] = []
        cursors: list[int | None] = []
        query: dict[str, Any] = {"limit": 2, **params}
        while True:
            body = conforms(await api.get(f"{API}/jobs", params=query), "GET", "/jobs")
            pages.append([item["id"] for item in body["items"]])
            cursors.append(body["next_before_id"])
            if body["next_before_id"] is None:
                return pages, cursors
            query["before_id"] = body["next_before_id"]

    pages, cursors = await walk(kind="match")
    assert [i for page in pages for i in page] == matching  # each match once, in order
    assert all(len(page) <= 2 for page in pages)
    assert [] in pages  # a window without a match is a page of its own
    assert cursors[0] is not None
    # 5 ids a page, but the 15 deleted ones cost none: 40 ids, 25 rows, at most 9 looks
    assert len(pages) <= 9
    pages, _ = await walk(search="MATCH", created_after="2000-01-01T00:00:00Z")
    assert [i for page in pages for i in page] == matching
    # an index serves a state filter: no window, full pages
    await fetch(aclient, "UPDATE wai.jobs SET state = 'cancelled', finalized_at = now()")
    pages, _ = await walk(kind="match", state="cancelled")
    assert pages == [matching[0:2], matching[2:4], matching[4:6]]
    # nothing in the table, or in the range: one empty page
    assert await walk(kind="match", created_after="2100-01-01T00:00:00Z") == ([[]], [None])


async def test_job_detail_cancel_and_retry(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    row = await aclient.insert(
        {"html": "<script>alert(1)</script>", "n": 2**70}, kind="page", metadata={"k": "v"}
    )
    body = conforms(await api.get(f"{API}/jobs/{row.id}"), "GET", "/jobs/{job_id}")
    assert body["args"] == {"html": "<script>alert(1)</script>", "n": 2**70}  # data, not markup
    assert (body["id"], body["kind"], body["state"], body["metadata"]) == (
        row.id,
        "page",
        "available",
        {"k": "v"},
    )

    cancelled = conforms(
        await api.post(f"{API}/jobs/{row.id}/cancel", headers=AUTH), "POST", "/jobs/{job_id}/cancel"
    )
    assert cancelled["state"] == "cancelled"
    assert (await aclient.get_job(row.id)).state == "cancelled"
    error = refused(await api.post(f"{API}/jobs/{row.id}/cancel", headers=AUTH), 409)
    assert error["code"] == "invalid_state"

    retried = conforms(
        await api.post(f"{API}/jobs/{row.id}/retry", headers=AUTH), "POST", "/jobs/{job_id}/retry"
    )
    assert retried["state"] == "available"
    refused(await api.post(f"{API}/jobs/{row.id}/retry", headers=AUTH), 409, "invalid_state")

    for method, path in [
        ("GET", "/jobs/999999"),
        ("POST", "/jobs/999999/cancel"),
        ("POST", "/jobs/999999/retry"),
    ]:
        refused(await api.request(method, API + path, headers=AUTH), 404, "not_found")

    entry = await dead(aclient)
    message = refused(await api.get(f"{API}/jobs/{entry.id}"), 404)["message"]
    assert "dead-letter queue" in message


# -- queues -----------------------------------------------------------------------------------


async def test_job_lineage_both_ways_with_what_is_owed(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    first = await aclient.insert(Work(n=1), queue="q")
    second = await aclient.insert(Work(n=2), queue="q")
    third = await aclient.insert(Work(n=3), queue="q")
    for parent, child in ((first, second), (second, third)):
        await fetch(
            aclient,
            "UPDATE wai.jobs SET trigger_job_id = %s, trigger_run_lease = 1,"
            " trigger_outcome = 'completed', trigger_spec = 'next' WHERE id = %s",
            (parent.id, child.id),
        )
    await aclient.cancel(third.id)  # this client holds no spec: an outbox row owes them

    path = "/jobs/{job_id}/lineage"
    down = conforms(await api.get(f"{API}/jobs/{first.id}/lineage"), "GET", path)
    assert down["job"]["id"] == first.id
    assert [a["id"] for a in down["ancestors"]] == []
    assert [f["id"] for f in down["followups"]] == [second.id, third.id]
    assert [f["trigger"]["job_id"] for f in down["followups"]] == [first.id, second.id]
    assert [(o["job_id"], o["outcome"]) for o in down["owed"]] == [(third.id, "cancelled")]
    assert down["truncated"] is False

    up = conforms(await api.get(f"{API}/jobs/{third.id}/lineage"), "GET", path)
    assert [a["id"] for a in up["ancestors"]] == [second.id, first.id]

    cut = conforms(await api.get(f"{API}/jobs/{first.id}/lineage?limit=1"), "GET", path)
    assert ([f["id"] for f in cut["followups"]], cut["truncated"]) == ([second.id], True)

    refused(await api.get(f"{API}/jobs/999999/lineage"), 404)
    for bad in ("0", "10001", "x", ""):
        refused(await api.get(f"{API}/jobs/{first.id}/lineage?limit={bad}"), 400)


async def test_queues_stats_pause_resume_drain(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    for state in ("available", "scheduled", "running"):
        await make(aclient, state)
    [q] = conforms(await api.get(f"{API}/queues"), "GET", "/queues")["items"]
    assert (q["name"], q["paused"], q["total"]) == ("q", False, 3)
    assert q["counts"]["available"] == 1

    paused = await api.post(f"{API}/queues/q/pause", headers=AUTH)
    assert conforms(paused, "POST", "/queues/{name}/pause") == {"queue": "q", "paused": True}
    [q] = conforms(await api.get(f"{API}/queues"), "GET", "/queues")["items"]
    assert q["paused"] is True
    assert q["paused_at"] is not None

    resumed = await api.post(f"{API}/queues/q/resume", headers=AUTH)
    assert conforms(resumed, "POST", "/queues/{name}/resume") == {"queue": "q", "paused": False}

    drained = await api.post(f"{API}/queues/q/drain", headers=AUTH)
    assert conforms(drained, "POST", "/queues/{name}/drain") == {"queue": "q", "cancelled": 2}
    [q] = conforms(await api.get(f"{API}/queues"), "GET", "/queues")["items"]
    assert (q["counts"]["cancelled"], q["counts"]["running"]) == (2, 1)


async def test_queue_limits_set_shown_kept_and_lifted(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    await make(aclient, "running")
    path = "/queues/{name}/limits"
    body = {"rate_limit": {"limit": 50, "per": 2.5, "burst": 10}, "global_concurrency": 5}
    answer = conforms(await api.put(f"{API}/queues/q/limits", json=body, headers=AUTH), "PUT", path)
    assert answer == {"queue": "q", **body}
    [q] = conforms(await api.get(f"{API}/queues"), "GET", "/queues")["items"]
    assert (q["rate_limit"], q["global_concurrency"]) == (body["rate_limit"], 5)
    assert 9.9 <= q["rate_tokens"] <= 10  # a new bucket starts full
    assert (q["counts"]["running"], q["keys_running"], q["waiting_turn"]) == (1, 0, 0)
    assert q["retry_holds_key"] is True
    [stats] = await aclient.queue_stats()
    assert stats.rate_limit == wai.RateLimit(50, per=2.5, burst=10)

    # per and burst take their defaults; the answer gives the burst as stored
    only = {"rate_limit": {"limit": 30}, "global_concurrency": None}
    answer = conforms(await api.put(f"{API}/queues/q/limits", json=only, headers=AUTH), "PUT", path)
    assert answer["rate_limit"] == {"limit": 30, "per": 1.0, "burst": 3}
    assert answer["global_concurrency"] is None
    lifted = {"rate_limit": None, "global_concurrency": None}
    answer = conforms(
        await api.put(f"{API}/queues/q/limits", json=lifted, headers=AUTH), "PUT", path
    )
    assert answer == {"queue": "q", **lifted}
    [q] = conforms(await api.get(f"{API}/queues"), "GET", "/queues")["items"]
    assert (q["rate_limit"], q["rate_tokens"], q["global_concurrency"]) == (None, None, None)

    # a queue no job names yet gets its row, and is listed with its limits
    fresh = {"rate_limit": None, "global_concurrency": 1}
    conforms(await api.put(f"{API}/queues/fresh/limits", json=fresh, headers=AUTH), "PUT", path)
    listed = conforms(await api.get(f"{API}/queues"), "GET", "/queues")["items"]
    assert {i["name"]: i["global_concurrency"] for i in listed} == {"fresh": 1, "q": None}


async def test_ordering_keys_at_work_are_shown(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    await keyed(aclient)
    [q] = conforms(await api.get(f"{API}/queues"), "GET", "/queues")["items"]
    assert (q["keys_running"], q["waiting_turn"]) == (1, 2)  # account-8's job may start
    assert (q["counts"]["running"], q["counts"]["available"]) == (1, 3)


#: (body, what the 400's message says) of PUT /queues/q/limits
BAD_LIMITS: list[tuple[Any, str]] = [
    ({}, "'rate_limit' is required"),
    ({"rate_limit": None}, "'global_concurrency' is required"),
    ({"global_concurrency": 5}, "'rate_limit' is required"),
    ({"rate_limit": None, "global_concurrency": 0}, "global_concurrency must be from 1"),
    ({"rate_limit": None, "global_concurrency": -3}, "global_concurrency must be from 1"),
    ({"rate_limit": None, "global_concurrency": 10**7}, "global_concurrency must be from 1"),
    ({"rate_limit": None, "global_concurrency": 2**70}, "global_concurrency must be"),
    ({"rate_limit": None, "global_concurrency": True}, "global_concurrency must be an integer"),
    ({"rate_limit": None, "global_concurrency": "5"}, "global_concurrency must be an integer"),
    ({"rate_limit": None, "global_concurrency": 2.5}, "global_concurrency must be an integer"),
    ({"rate_limit": None, "global_concurrency": [5]}, "global_concurrency must be an integer"),
    ({"rate_limit": 50, "global_concurrency": None}, "rate_limit must be an object"),
    ({"rate_limit": "50/s", "global_concurrency": None}, "rate_limit must be an object"),
    ({"rate_limit": [50, 1], "global_concurrency": None}, "rate_limit must be an object"),
    ({"rate_limit": {}, "global_concurrency": None}, "rate_limit.limit is required"),
    ({"rate_limit": {"per": 1}, "global_concurrency": None}, "rate_limit.limit is required"),
    ({"rate_limit": {"limit": 0}, "global_concurrency": None}, "rate_limit.limit must be from 1"),
    ({"rate_limit": {"limit": False}, "global_concurrency": None}, "rate_limit.limit must be an"),
    ({"rate_limit": {"limit": "abc"}, "global_concurrency": None}, "rate_limit.limit must be an"),
    ({"rate_limit": {"limit": 10**6 + 1}, "global_concurrency": None}, "rate_limit.limit must"),
    ({"rate_limit": {"limit": 5, "per": 0}, "global_concurrency": None}, "rate_limit.per must"),
    ({"rate_limit": {"limit": 5, "per": -1}, "global_concurrency": None}, "rate_limit.per must"),
    ({"rate_limit": {"limit": 5, "per": 1e300}, "global_concurrency": None}, "rate_limit.per"),
    ({"rate_limit": {"limit": 5, "per": True}, "global_concurrency": None}, "rate_limit.per"),
    ({"rate_limit": {"limit": 5, "per": "1"}, "global_concurrency": None}, "rate_limit.per"),
    ({"rate_limit": {"limit": 5, "per": None}, "global_concurrency": None}, "rate_limit.per"),
    ({"rate_limit": {"limit": 5, "burst": 0}, "global_concurrency": None}, "rate_limit.burst"),
    ({"rate_limit": {"limit": 5, "burst": 1.5}, "global_concurrency": None}, "rate_limit.burst"),
    ({"rate_limit": {"limit": 5, "rate": 2}, "global_concurrency": None}, "unknown field 'rate'"),
    ({"rate_limit": None, "global_concurrency": None, "paused": True}, "unknown field 'paused'"),
    ([], "must be a JSON object"),
    (None, "must be a JSON object"),
]


async def test_hostile_limits_are_400_with_a_clear_message_and_change_nothing(
    aclient: wai.AsyncClient, world: World, api: httpx.AsyncClient
) -> None:
    await aclient.set_queue_limits("q", rate_limit=wai.RateLimit(7), global_concurrency=2)
    before = await snapshot(aclient)
    for body, message in BAD_LIMITS:
        response = await api.put(
            f"{API}/queues/q/limits",
            content=json.dumps(body).encode(),
            headers={**AUTH, "Content-Type": "application/json"},
        )
        assert message in refused(response, 400, "bad_request")["message"], body
    for content in (b"", b"{", b'{"rate_limit": {"limit": 5, "per": 1e400}}'):
        response = await api.put(
            f"{API}/queues/q/limits",
            content=content,
            headers={**AUTH, "Content-Type": "application/json"},
        )
        refused(response, 400, "bad_request")
    wrong_type = await api.put(f"{API}/queues/q/limits", content=b"{}", headers=AUTH)
    refused(wrong_type, 415, "unsupported_media_type")
    refused(await api.post(f"{API}/queues/q/limits", json={}, headers=AUTH), 405)
    assert await snapshot(aclient) == before


async def test_kind_rate_limits_set_shown_and_lifted(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    await make(aclient, "available")
    await aclient.set_queue_limits("q", global_concurrency=3)
    path = "/queues/{name}/kinds/{kind}/limit"
    body = {"rate_limit": {"limit": 10, "per": 60.0, "burst": 2}}
    answer = conforms(
        await api.put(f"{API}/queues/q/kinds/work/limit", json=body, headers=AUTH), "PUT", path
    )
    assert answer == {"queue": "q", "kind": "work", **body}
    # per and burst take their defaults; the answer gives the burst as stored
    answer = conforms(
        await api.put(
            f"{API}/queues/q/kinds/billing.charge:v2/limit",
            json={"rate_limit": {"limit": 30}},
            headers=AUTH,
        ),
        "PUT",
        path,
    )
    assert answer == {
        "queue": "q",
        "kind": "billing.charge:v2",
        "rate_limit": {"limit": 30, "per": 1.0, "burst": 3},
    }
    [q] = conforms(await api.get(f"{API}/queues"), "GET", "/queues")["items"]
    assert q["kind_rate_limits"] == {
        "work": body["rate_limit"],
        "billing.charge:v2": {"limit": 30, "per": 1.0, "burst": 3},
    }
    assert q["kind_tokens"] == {"work": 2.0, "billing.charge:v2": 3.0}  # new buckets start full
    assert (q["rate_limit"], q["global_concurrency"]) == (None, 3)  # the queue's own, kept
    [stats] = await aclient.queue_stats()
    assert stats.kind_rate_limits["work"] == wai.RateLimit(10, per=60.0, burst=2)

    lifted = {"rate_limit": None}
    answer = conforms(
        await api.put(f"{API}/queues/q/kinds/work/limit", json=lifted, headers=AUTH), "PUT", path
    )
    assert answer == {"queue": "q", "kind": "work", "rate_limit": None}
    [q] = conforms(await api.get(f"{API}/queues"), "GET", "/queues")["items"]
    assert list(q["kind_rate_limits"]) == list(q["kind_tokens"]) == ["billing.charge:v2"]
    # lifting a limit the kind does not have answers the same and changes nothing
    before = await snapshot(aclient)
    answer = conforms(
        await api.put(f"{API}/queues/q/kinds/other/limit", json=lifted, headers=AUTH), "PUT", path
    )
    assert answer == {"queue": "q", "kind": "other", "rate_limit": None}
    assert (await snapshot(aclient))["kind_limits"] == before["kind_limits"]

    # a queue no job names yet gets its row, and is listed with its kind's limit
    conforms(
        await api.put(f"{API}/queues/fresh/kinds/work/limit", json=body, headers=AUTH), "PUT", path
    )
    listed = conforms(await api.get(f"{API}/queues"), "GET", "/queues")["items"]
    assert {i["name"]: list(i["kind_rate_limits"]) for i in listed} == {
        "fresh": ["work"],
        "q": ["billing.charge:v2"],
    }


#: (body, what the 400's message says) of PUT /queues/q/kinds/work/limit
BAD_KIND_LIMITS: list[tuple[Any, str]] = [
    ({}, "'rate_limit' is required"),
    ({"global_concurrency": 5}, "unknown field 'global_concurrency'"),
    ({"rate_limit": None, "global_concurrency": None}, "unknown field 'global_concurrency'"),
    ({"rate_limit": 10}, "rate_limit must be an object"),
    ({"rate_limit": "10/s"}, "rate_limit must be an object"),
    ({"rate_limit": True}, "rate_limit must be an object"),
    ({"rate_limit": [10, 1]}, "rate_limit must be an object"),
    ({"rate_limit": {}}, "rate_limit.limit is required"),
    ({"rate_limit": {"per": 1, "burst": 2}}, "rate_limit.limit is required"),
    ({"rate_limit": {"limit": 0}}, "rate_limit.limit must be from 1"),
    ({"rate_limit": {"limit": -5}}, "rate_limit.limit must be from 1"),
    ({"rate_limit": {"limit": 2**70}}, "rate_limit.limit must be"),
    ({"rate_limit": {"limit": 2.5}}, "rate_limit.limit must be an integer"),
    ({"rate_limit": {"limit": "10"}}, "rate_limit.limit must be an integer"),
    ({"rate_limit": {"limit": None}}, "rate_limit.limit must be an integer"),
    ({"rate_limit": {"limit": 5, "per": 0}}, "rate_limit.per must be a number of seconds"),
    ({"rate_limit": {"limit": 5, "per": 86_401}}, "rate_limit.per must be a number of seconds"),
    ({"rate_limit": {"limit": 5, "per": False}}, "rate_limit.per must be a number of seconds"),
    ({"rate_limit": {"limit": 5, "per": "60"}}, "rate_limit.per must be a number of seconds"),
    ({"rate_limit": {"limit": 5, "burst": 0}}, "rate_limit.burst must be from 1"),
    ({"rate_limit": {"limit": 5, "burst": "2"}}, "rate_limit.burst must be an integer"),
    ({"rate_limit": {"limit": 5, "kind": "x"}}, "unknown field 'kind' in rate_limit"),
    ([], "must be a JSON object"),
    (None, "must be a JSON object"),
    ("charge", "must be a JSON object"),
]


async def test_hostile_kind_limits_are_400_with_a_clear_message_and_change_nothing(
    aclient: wai.AsyncClient, world: World, api: httpx.AsyncClient
) -> None:
    await aclient.set_kind_rate_limit("q", "work", wai.RateLimit(7, burst=2))
    before = await snapshot(aclient)
    url = f"{API}/queues/q/kinds/work/limit"
    json_type = {**AUTH, "Content-Type": "application/json"}
    for body, message in BAD_KIND_LIMITS:
        response = await api.put(url, content=json.dumps(body).encode(), headers=json_type)
        assert message in refused(response, 400, "bad_request")["message"], body
    for content in (
        b"",
        b"{",
        b'{"rate_limit": {"limit": 5, "per": 1e400}}',
        b'{"rate_limit": NaN}',
    ):
        refused(await api.put(url, content=content, headers=json_type), 400, "bad_request")
    refused(await api.put(url, content=b"{}", headers=AUTH), 415, "unsupported_media_type")
    refused(await api.post(url, json={"rate_limit": None}, headers=AUTH), 405)
    refused(await api.get(url), 405)
    assert await snapshot(aclient) == before


async def test_hostile_kinds_are_4xx_and_change_nothing(
    aclient: wai.AsyncClient, world: World, api: httpx.AsyncClient
) -> None:
    before = await snapshot(aclient)
    body = {"rate_limit": {"limit": 5}}
    for bad in [
        "a%20b",
        "%00",
        "a%00b",
        "x" * 201,
        "%C3%A9",
        "'%3B--",
        "%2E%2E%2Fx",
        "%EF%BF%BD",
        "work%0A",
    ]:
        response = await api.put(f"{API}/queues/q/kinds/{bad}/limit", json=body, headers=AUTH)
        if response.status_code == 404:  # a path no route matches at all
            refused(response, 404, "not_found")
        else:
            assert "kind: invalid job kind" in refused(response, 400, "bad_request")["message"]
    for bad in ["a%20b", "x" * 201]:  # the queue is checked too
        response = await api.put(f"{API}/queues/{bad}/kinds/work/limit", json=body, headers=AUTH)
        assert "invalid queue name" in refused(response, 400, "bad_request")["message"]
    assert await snapshot(aclient) == before


async def test_depth_history(aclient: wai.AsyncClient, api: httpx.AsyncClient) -> None:
    assert conforms(await api.get(f"{API}/stats/depth"), "GET", "/stats/depth") == {"items": []}
    for state in ("available", "running"):
        await make(aclient, state)
    await make(aclient, "available", queue="other")
    await DepthSampler(aclient.pool, aclient.schema, interval=15).run_once()

    body = conforms(await api.get(f"{API}/stats/depth"), "GET", "/stats/depth")
    assert [(i["queue"], i["depth"]) for i in body["items"]] == [("other", 1), ("q", 2)]
    assert body["items"][1]["counts"] == {"scheduled": 0, "available": 1, "running": 1,
                                          "retryable": 0, "waiting_external": 0}  # fmt: skip
    only = await api.get(f"{API}/stats/depth", params={"queue": "q", "minutes": 5})
    assert [i["queue"] for i in conforms(only, "GET", "/stats/depth")["items"]] == ["q"]
    for params in ({"minutes": 0}, {"minutes": 1441}, {"minutes": "x"}, {"queue": "a b"}):
        refused(await api.get(f"{API}/stats/depth", params=params), 400)


async def test_throughput(aclient: wai.AsyncClient, api: httpx.AsyncClient) -> None:
    recorder = ThroughputRecorder(aclient.pool, aclient.schema, interval=5)
    recorder.tally.add("q", "work", "completed", 7)
    recorder.tally.add("q", "work", "failed", 1)
    recorder.tally.add("other", "mail", "completed", 2)
    await recorder.flush()

    body = conforms(await api.get(f"{API}/stats/throughput"), "GET", "/stats/throughput")
    assert len(body["items"]) == 60
    assert body["items"][-1]["counts"]["completed"] == 9
    assert body["items"][0]["counts"] == dict.fromkeys(
        ["completed", "retried", "failed", "cancelled", "snoozed", "parked", "rescued"], 0
    )
    only = await api.get(f"{API}/stats/throughput", params={"queue": "q", "minutes": 2})
    items = conforms(only, "GET", "/stats/throughput")["items"]
    assert [m["counts"]["completed"] for m in items][-1] == 7
    mail = await api.get(f"{API}/stats/throughput", params={"kind": "mail", "minutes": 1})
    assert conforms(mail, "GET", "/stats/throughput")["items"][0]["counts"]["completed"] == 2
    for params in ({"minutes": 0}, {"minutes": 99999}, {"queue": "a b"}, {"kind": "x\x00"}):
        refused(await api.get(f"{API}/stats/throughput", params=params), 400)


# -- dead-letter queue ------------------------------------------------------------------------


async def test_dlq_list_filters_and_cursor_pages(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    entries = [
        await dead(aclient, queue="dq" if n % 2 else "dq2", tags=(f"t{n}",)) for n in range(5)
    ]
    newest_first = [e.id for e in reversed(entries)]

    async def page(**params: Any) -> dict[str, Any]:
        return conforms(await api.get(f"{API}/dlq", params=params), "GET", "/dlq")

    body = await page()
    assert [item["job"]["id"] for item in body["items"]] == newest_first
    assert body["next_before"] is None
    assert {item["reason"] for item in body["items"]} == {"manual"}
    assert [i["job"]["id"] for i in (await page(queue="dq"))["items"]] == [
        e.id for e in reversed(entries) if e.queue == "dq"
    ]
    assert [i["job"]["id"] for i in (await page(tag="t2"))["items"]] == [entries[2].id]
    assert (await page(reason="terminal_error"))["items"] == []
    assert len((await page(kind="work"))["items"]) == 5

    walked: list[int] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        body = await page(**params)
        walked += [item["job"]["id"] for item in body["items"]]
        if body["next_before"] is None:
            break
        assert body["next_before"] == body["items"][-1]["cursor"]
        params["before"] = body["next_before"]
    assert walked == newest_first

    one = conforms(await api.get(f"{API}/dlq/{entries[0].id}"), "GET", "/dlq/{job_id}")
    assert (one["job"]["id"], one["job"]["state"]) == (entries[0].id, "failed")
    refused(await api.get(f"{API}/dlq/999999"), 404, "not_found")


async def test_dlq_retry_and_purge_one_and_in_bulk(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    a, b, c, d = [await dead(aclient, queue="dq", tags=(tag,)) for tag in ("x", "x", "y", "z")]

    moved = await api.post(
        f"{API}/dlq/{a.id}/retry",
        json={"queue": "elsewhere", "priority": 1, "run_at": "2030-01-01T00:00:00Z"},
        headers=AUTH,
    )
    row = conforms(moved, "POST", "/dlq/{job_id}/retry")
    assert (row["id"], row["queue"], row["priority"], row["state"]) == (
        a.id,
        "elsewhere",
        1,
        "scheduled",
    )
    refused(await api.post(f"{API}/dlq/{a.id}/retry", headers=AUTH), 404, "not_found")

    before = await snapshot(aclient)
    for action in ("retry", "purge"):
        for body in (None, {}, {"all": False}):
            error = refused(
                await api.post(f"{API}/dlq/{action}", json=body, headers=AUTH), 400, "bad_request"
            )
            assert "all" in error["message"]
    assert await snapshot(aclient) == before

    bulk = await api.post(f"{API}/dlq/retry", json={"tag": "x", "to_queue": "back"}, headers=AUTH)
    assert conforms(bulk, "POST", "/dlq/retry") == {"retried": 1}
    assert (await aclient.get_job(b.id)).queue == "back"

    purged = await api.delete(f"{API}/dlq/{c.id}", headers=AUTH)
    assert conforms(purged, "DELETE", "/dlq/{job_id}") == {"purged": 1}
    refused(await api.delete(f"{API}/dlq/{c.id}", headers=AUTH), 404, "not_found")

    everything = await api.post(f"{API}/dlq/purge", json={"all": True}, headers=AUTH)
    assert conforms(everything, "POST", "/dlq/purge") == {"purged": 1}
    assert await aclient.dlq_depth() == 0
    assert [e.job.id for e in await aclient.list_dlq()] == []
    del d


# -- cron -------------------------------------------------------------------------------------


async def test_cron_list_pause_resume_trigger_delete(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    aclient.periodic("nightly", "0 3 * * *", Work(n=3), queue="q", timezone="Europe/Paris")
    aclient.periodic("reports/daily", "@daily", Work(n=4), queue="q")
    await aclient.upsert_cron()

    listed = conforms(await api.get(f"{API}/cron"), "GET", "/cron")["items"]
    assert [s["name"] for s in listed] == ["nightly", "reports/daily"]
    assert all(s["next_fire_at"] is not None and s["paused"] is False for s in listed)
    assert listed[0]["timezone"] == "Europe/Paris"

    one = conforms(await api.get(f"{API}/cron/reports/daily"), "GET", "/cron/{name}")
    assert one["name"] == "reports/daily"
    encoded = conforms(await api.get(f"{API}/cron/reports%2Fdaily"), "GET", "/cron/{name}")
    assert encoded["name"] == "reports/daily"

    paused = conforms(
        await api.post(f"{API}/cron/nightly/pause", headers=AUTH), "POST", "/cron/{name}/pause"
    )
    assert (paused["paused"], paused["next_fire_at"]) == (True, None)
    resumed = conforms(
        await api.post(f"{API}/cron/nightly/resume", headers=AUTH), "POST", "/cron/{name}/resume"
    )
    assert resumed["paused"] is False
    job = conforms(
        await api.post(f"{API}/cron/reports/daily/trigger", headers=AUTH),
        "POST",
        "/cron/{name}/trigger",
    )
    assert job["args"] == {"n": 4}
    assert job["metadata"]["wai.cron"]["manual"] is True

    deleted = await api.delete(f"{API}/cron/nightly", headers=AUTH)
    assert conforms(deleted, "DELETE", "/cron/{name}") == {"name": "nightly", "deleted": True}
    for method, path in [
        ("GET", "/cron/nightly"),
        ("POST", "/cron/nightly/pause"),
        ("POST", "/cron/nightly/resume"),
        ("POST", "/cron/nightly/trigger"),
        ("DELETE", "/cron/nightly"),
    ]:
        refused(await api.request(method, API + path, headers=AUTH), 404, "not_found")


# -- callbacks --------------------------------------------------------------------------------


async def test_waiting_jobs_and_callback_timeouts(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    soon, soon_cid = await parked(aclient, timeout=60)
    late, _ = await parked(aclient, timeout=3600)
    timed_out, _ = await parked(aclient)
    await expire(aclient, timed_out.id)
    await Rescuer(aclient.pool, aclient.schema, interval=60, staleness=30).run_once()
    over, _ = await parked(aclient, timeout=600)
    await expire(aclient, over.id)  # overdue: the next rescue pass closes its attempt
    await fetch(aclient, "UPDATE wai.jobs SET queue = 'billing' WHERE id = %s", (late.id,))

    async def waiting(**params: Any) -> dict[str, Any]:
        return conforms(await api.get(f"{API}/callbacks", params=params), "GET", "/callbacks")

    body = await waiting()
    assert [item["job"]["id"] for item in body["items"]] == [over.id, soon.id, late.id]
    assert body["next_after"] is None
    first, second = body["items"][0], body["items"][1]
    assert (first["overdue"], second["overdue"]) == (True, False)
    assert second["callback_id"] == str(soon_cid)
    assert second["timeout_at"] == second["job"]["callback_timeout_at"]
    assert second["in_place"] is False
    assert [i["job"]["id"] for i in (await waiting(queue="billing"))["items"]] == [late.id]
    assert (await waiting(kind="nope"))["items"] == []
    walked: list[int] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        body = await waiting(**params)
        walked += [item["job"]["id"] for item in body["items"]]
        if body["next_after"] is None:
            break
        assert body["next_after"] == body["items"][-1]["cursor"]
        params["after"] = body["next_after"]
    assert walked == [over.id, soon.id, late.id]
    for bad in ("nope", "2026-01-01T00:00:00/1", "2026-01-01T00:00:00+00:00/x"):
        error = refused(await api.get(f"{API}/callbacks", params={"after": bad}), 400)
        assert "cursor" in error["message"]

    path = "/callbacks/timeouts"
    found = conforms(await api.get(f"{API}{path}"), "GET", path)["items"]
    assert [item["job"]["id"] for item in found] == [timed_out.id]
    assert found[0]["job"]["state"] == "retryable"
    assert found[0]["dead_lettered"] is False
    at = datetime.fromisoformat(found[0]["timed_out_at"])
    assert at == datetime.fromisoformat(found[0]["job"]["errors"][-1]["at"])
    assert conforms(await api.get(f"{API}{path}?queue=billing"), "GET", path)["items"] == []
    refused(await api.get(f"{API}{path}?limit=1001"), 400, "bad_request")


# -- instances --------------------------------------------------------------------------------


async def test_instances_with_their_specs_and_drift(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    assert conforms(await api.get(f"{API}/instances"), "GET", "/instances") == {
        "items": [],
        "drift": [],
    }
    for name, specs in [
        ("host:1:a", '[{"kind": "signup", "outcome": "completed", "spec": "welcome"}]'),
        ("host:2:b", '[{"kind": "signup", "outcome": "completed", "spec": "other"}]'),
    ]:
        await fetch(
            aclient,
            "INSERT INTO wai.runtime_instances (instance_id, hostname, pid, version, role,"
            " queues, concurrency, specs) VALUES (%s, 'host', 1, '0.1.0', 'worker',"
            " '{\"q\": 4}', 4, %s::jsonb)",
            (name, specs),
        )
    body = conforms(await api.get(f"{API}/instances"), "GET", "/instances")
    assert [i["instance_id"] for i in body["items"]] == ["host:1:a", "host:2:b"]
    assert body["items"][0]["specs"] == [
        {"kind": "signup", "outcome": "completed", "spec": "welcome"}
    ]
    assert body["items"][0]["queues"] == {"q": 4}
    assert body["drift"] == [
        {
            "kind": "signup",
            "outcome": "completed",
            "specs_by_instance": {"host:1:a": ["welcome"], "host:2:b": ["other"]},
        }
    ]


# -- outbox -----------------------------------------------------------------------------------


async def test_outbox_list_stats_retry_discard(
    aclient: wai.AsyncClient, api: httpx.AsyncClient
) -> None:
    cancelled = []
    for _ in range(3):
        row = await make(aclient, "running")
        await aclient.cancel(row.id)  # a bare client: the follow-ups wait in the outbox
        cancelled.append(row.id)
    await fetch(
        aclient, "UPDATE wai.outbox SET failed_at = now() WHERE job_id = %s", (cancelled[0],)
    )

    async def page(**params: Any) -> dict[str, Any]:
        return conforms(await api.get(f"{API}/outbox", params=params), "GET", "/outbox")

    body = await page()
    assert [e["job_id"] for e in body["items"]] == cancelled
    assert [e["state"] for e in body["items"]] == ["failed", "pending", "pending"]
    assert body["next_after_id"] is None
    ids = [e["id"] for e in body["items"]]
    assert [e["id"] for e in (await page(state="failed"))["items"]] == ids[:1]
    assert [e["id"] for e in (await page(kind="work"))["items"]] == ids
    first = await page(limit=2)
    assert first["next_after_id"] == ids[1]
    assert [e["id"] for e in (await page(after_id=ids[1]))["items"]] == ids[2:]

    stats = conforms(await api.get(f"{API}/outbox/stats"), "GET", "/outbox/stats")
    assert (stats["pending"], stats["failed"]) == (2, 1)

    retried = await api.post(f"{API}/outbox/{ids[0]}/retry", headers=AUTH)
    entry = conforms(retried, "POST", "/outbox/{outbox_id}/retry")
    assert (entry["id"], entry["state"], entry["attempts"]) == (ids[0], "pending", 0)

    discarded = await api.delete(f"{API}/outbox/{ids[0]}", headers=AUTH)
    assert conforms(discarded, "DELETE", "/outbox/{outbox_id}") == {"discarded": 1}
    refused(await api.delete(f"{API}/outbox/{ids[0]}", headers=AUTH), 404, "not_found")
    refused(await api.post(f"{API}/outbox/{ids[0]}/retry", headers=AUTH), 404, "not_found")


# -- hostile input ----------------------------------------------------------------------------

#: Values no text filter, id or limit accepts as they are, or accepts only as data.
NASTY = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ufffd",
    HOSTILE,
    "x" * 5000,
    "-1",
    "0",
    "1.5",
    "1e3",
    "\u0661\u0662",  # Arabic-Indic digits: int() reads them
    "1_000",
    " 1",
    "0x10",
    str(2**63),
    str(2**64),
    "9" * 400,
    "null",
    "[]",
    "../../etc/passwd",
    "<script>alert(1)</script>",
    "\n\r",
    "%00",
]


async def test_hostile_query_parameters_are_400_or_data_never_5xx(
    aclient: wai.AsyncClient, world: World, api: httpx.AsyncClient
) -> None:
    before = await snapshot(aclient)
    for endpoint in ROUTES:
        if endpoint.method != "GET" or endpoint.path_params:
            continue
        for param in endpoint.query:
            for value in NASTY:
                response = await api.get(API + endpoint.path, params={param.name: value})
                if response.status_code != 200:
                    refused(response, 400, "bad_request")
        unknown = await api.get(API + endpoint.path, params={"bogus": "1"})
        assert "unknown query parameter 'bogus'" in refused(unknown, 400)["message"]
    for query in ("limit=1&limit=2", "state=failed&state=failed", "limit=1001", "state=bogus"):
        refused(await api.get(f"{API}/jobs?{query}"), 400, "bad_request")
    for query in ("before=nope", "before=2026-01-01T00:00:00/abc", "before=2026-01-01T00:00:00/1"):
        refused(await api.get(f"{API}/dlq?{query}"), 400, "bad_request")
    refused(await api.get(f"{API}/outbox?state=done"), 400, "bad_request")
    # percent-encoded invalid UTF-8 (a lone surrogate's bytes) arrives as U+FFFD: data
    conforms(await api.get(f"{API}/jobs?kind=%ED%A0%80"), "GET", "/jobs")
    assert await snapshot(aclient) == before


def _free_text_inputs() -> list[tuple[str, str, dict[str, Any]]]:
    """(operationId, name, schema) of every string parameter and body field without an enum or
    a format: the inputs a client fills with free text."""
    found: list[tuple[str, str, dict[str, Any]]] = []
    for op in _OPERATIONS.values():
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
        fields = body.get("schema", {}).get("properties", {})
        for name, schema in [(p["name"], p["schema"]) for p in op["parameters"]] + list(
            fields.items()
        ):
            # the sign-in token (writeOnly) is compared, never stored: a NUL is a wrong token
            secret = schema.get("writeOnly", False)
            if (
                schema.get("type") == "string"
                and not {"enum", "format"} & set(schema)
                and not secret
            ):
                found.append((op["operationId"], name, schema))
    return found


async def test_the_document_refuses_the_nul_byte_that_the_api_refuses(
    aclient: wai.AsyncClient, world: World, api: httpx.AsyncClient
) -> None:
    # PostgreSQL stores no NUL, so the API answers 400 to one: a client that trusts the
    # document must not find a NUL valid there.
    inputs = _free_text_inputs()
    assert {name for _, name, _ in inputs} >= {"kind", "tag", "reason", "queue", "before", "name"}
    for operation_id, name, schema in inputs:
        assert jsonschema.Draft202012Validator(schema).is_valid("a-b"), (operation_id, name)
        assert not jsonschema.Draft202012Validator(schema).is_valid("a\x00b"), (operation_id, name)
    before = await snapshot(aclient)
    for response in [
        await api.get(f"{API}/jobs", params={"kind": "a\x00b"}),
        await api.get(f"{API}/dlq", params={"before": "a\x00b"}),
        await api.get(f"{API}/cron/a%00b"),
        await api.post(f"{API}/dlq/purge", json={"tag": "a\x00b"}, headers=AUTH),
    ]:
        assert "NUL" in refused(response, 400, "bad_request")["message"]
    assert await snapshot(aclient) == before


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/jobs/{}"),
        ("POST", "/jobs/{}/cancel"),
        ("POST", "/jobs/{}/retry"),
        ("GET", "/dlq/{}"),
        ("POST", "/dlq/{}/retry"),
        ("DELETE", "/dlq/{}"),
        ("POST", "/outbox/{}/retry"),
        ("DELETE", "/outbox/{}"),
    ],
)
async def test_hostile_ids_are_400_and_change_nothing(
    aclient: wai.AsyncClient, world: World, api: httpx.AsyncClient, method: str, path: str
) -> None:
    before = await snapshot(aclient)
    for bad in [
        "abc",
        "0",
        "-1",
        "1.0",
        "1e2",
        "%20",
        "%00",
        "\u0661",
        str(2**63),
        "9" * 400,
        "0x1",
    ]:
        response = await api.request(method, API + path.format(bad), headers=AUTH)
        if response.status_code == 404:  # a path no route matches at all ("%20" → " ")
            refused(response, 404, "not_found")
        else:
            assert "must be" in refused(response, 400, "bad_request")["message"]
    refused(await api.request(method, API + path.format(2**63 - 1), headers=AUTH), 404)
    assert await snapshot(aclient) == before


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/queues/{}/pause"),
        ("POST", "/queues/{}/resume"),
        ("POST", "/queues/{}/drain"),
        ("PUT", "/queues/{}/limits"),
        ("PUT", "/queues/{}/kinds/work/limit"),
        ("PUT", "/queues/q/kinds/{}/limit"),
        ("GET", "/cron/{}"),
        ("POST", "/cron/{}/pause"),
        ("POST", "/cron/{}/trigger"),
        ("DELETE", "/cron/{}"),
    ],
)
async def test_hostile_names_are_4xx_and_change_nothing(
    aclient: wai.AsyncClient, world: World, api: httpx.AsyncClient, method: str, path: str
) -> None:
    before = await snapshot(aclient)
    names = ["%00", "a%00b", "x" * 201, "a%20b" if "queues" in path else "\ufffd", "'%3B--"]
    for bad in names:
        response = await api.request(method, API + path.format(bad), headers=AUTH)
        assert response.status_code in (400, 404), response.text
        refused(response, response.status_code)
    assert await snapshot(aclient) == before


BAD_BODIES: list[tuple[bytes, str, int]] = [
    (b"{", "application/json", 400),
    (b"[1, 2]", "application/json", 400),
    (b"null", "application/json", 400),
    (b'"all"', "application/json", 400),
    (b'{"all": "true"}', "application/json", 400),
    (b'{"all": 1}', "application/json", 400),
    (b'{"all": true, "bogus": 1}', "application/json", 400),
    (b'{"kind": "a\\u0000b"}', "application/json", 400),
    (b'{"kind": "\\ud800"}', "application/json", 400),
    (b'{"kind": ""}', "application/json", 400),
    (b'{"kind": 7}', "application/json", 400),
    (b'{"queue": "no spaces"}', "application/json", 400),
    (b'{"reason": "' + b"r" * 300 + b'"}', "application/json", 400),
    (b'{"all": true, "priority": "1"}', "application/json", 400),
    (b'{"all": true, "priority": 9}', "application/json", 400),
    (b'{"all": true, "priority": 1.0}', "application/json", 400),
    (b'{"all": true, "run_at": "2030-01-01T00:00:00"}', "application/json", 400),
    (b'{"all": true, "run_at": "tomorrow"}', "application/json", 400),
    (b'{"all": NaN}', "application/json", 400),
    (b"\xff\xfe{}", "application/json", 400),
    (b"[" * 5000 + b"]" * 5000, "application/json", 400),
    (b'{"all": true}', "text/plain", 415),
    (b'{"all": true}', "application/x-www-form-urlencoded", 415),
    (b'{"all": true}', "", 415),
    (b'{"all": true, "kind": "' + b"k" * 70_000 + b'"}', "application/json", 413),
]


@pytest.mark.parametrize(("content", "content_type", "status"), BAD_BODIES)
async def test_bad_bodies_are_refused_and_change_nothing(
    aclient: wai.AsyncClient,
    world: World,
    api: httpx.AsyncClient,
    content: bytes,
    content_type: str,
    status: int,
) -> None:
    before = await snapshot(aclient)
    headers = {**AUTH, "Content-Type": content_type}
    for path in ("/dlq/retry", "/dlq/purge", f"/dlq/{world.dead.id}/retry"):
        response = await api.post(API + path, content=content, headers=headers)
        refused(response, status)
    assert await snapshot(aclient) == before


async def test_a_body_where_none_is_taken_must_be_an_empty_object(
    aclient: wai.AsyncClient, world: World, api: httpx.AsyncClient
) -> None:
    before = await snapshot(aclient)
    cancel = f"{API}/jobs/{world.running.id}/cancel"
    assert (
        "unknown field 'reason'"
        in refused(await api.post(cancel, json={"reason": "x"}, headers=AUTH), 400)["message"]
    )
    assert await snapshot(aclient) == before
    conforms(await api.post(cancel, json={}, headers=AUTH), "POST", "/jobs/{job_id}/cancel")


async def test_size_is_checked_before_reading_a_lying_or_missing_content_length(
    aclient: wai.AsyncClient, world: World, api: httpx.AsyncClient
) -> None:
    before = await snapshot(aclient)

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"all": true, "kind": "'
        for _ in range(100):
            yield b"k" * 1000
        yield b'"}'

    streamed = await api.post(
        f"{API}/dlq/purge", content=chunks(), headers={**AUTH, "Content-Type": "application/json"}
    )
    refused(streamed, 413, "payload_too_large")
    for length in ("abc", "-1", "1e3"):
        lying = await api.post(
            f"{API}/dlq/purge",
            content=b'{"all": true}',
            headers={**AUTH, "Content-Type": "application/json", "Content-Length": length},
        )
        refused(lying, 400, "bad_request")
    assert await snapshot(aclient) == before


async def test_unknown_paths_and_methods_are_json_errors(api: httpx.AsyncClient) -> None:
    refused(await api.get("/nowhere"), 404, "not_found")  # "/" is the web UI (test_web_ui.py)
    refused(await api.get(f"{API}/jobs/"), 404, "not_found")  # no redirect to build a URL for
    refused(await api.get(f"{API}/nope"), 404, "not_found")
    wrong = await api.put(f"{API}/jobs", headers=AUTH)
    refused(wrong, 405, "method_not_allowed")
    assert "GET" in wrong.headers["allow"]
    refused(await api.get(f"{API}/jobs/1/cancel"), 405, "method_not_allowed")


# -- the database down or behind ----------------------------------------------------------------


async def test_an_unreachable_database_is_503() -> None:
    client = wai.AsyncClient(UNREACHABLE)
    try:
        async with http(create_app(client, token=TOKEN, read_only=False)) as api:
            for method, path in [("GET", "/jobs"), ("GET", "/queues"), ("POST", "/queues/q/pause")]:
                response = await api.request(method, API + path, headers=AUTH)
                error = refused(response, 503, "database_unavailable")
                assert response.headers["retry-after"] == "5"
                assert "127.0.0.1" not in error["message"]  # no server detail to anonymous readers
            async with http(server_app(client, token=None)) as probes:
                live = await probes.get("/healthz")
                assert live.status_code == 200  # an outage is not the process's fault
                assert live.json()["live"] is True
                ready = await probes.get("/readyz")
                assert ready.status_code == 503
                body = ready.json()
                assert (body["ready"], body["database"], body["runtime"]) == (False, False, None)
                assert body["problems"][0].startswith("database unreachable")
    finally:
        await client.close()


async def test_an_unmigrated_schema_is_503_and_not_ready(empty_database_url: str) -> None:
    async with (
        wai.AsyncClient(empty_database_url) as client,
        http(server_app(client, token=None)) as app,
    ):
        error = refused(await app.get(f"{API}/jobs"), 503, "schema_not_migrated")
        assert "wai migrate" in error["message"]
        ready = await app.get("/readyz")
        assert ready.status_code == 503
        body = ready.json()
        assert (body["ready"], body["live"], body["database"]) == (False, True, True)
        assert body["schema_current"] is False
        assert body["pending_migrations"][0] == 1
        assert "lacks migrations" in body["problems"][0]


async def test_the_server_app_probes_and_serves_read_only(aclient: wai.AsyncClient) -> None:
    row = await make(aclient, "available")
    async with http(server_app(aclient, token=None)) as app:
        health = await app.get("/healthz")
        assert (health.status_code, health.json()["live"]) == (200, True)
        ready = await app.get("/readyz")
        assert ready.status_code == 200
        body = ready.json()
        assert (body["ready"], body["schema_current"], body["problems"]) == (True, True, [])
        assert ready.headers["cache-control"] == "no-store"
        metrics = await app.get("/metrics")
        assert metrics.status_code == 200
        assert "wai_jobs_inserted_total" in metrics.text
        conforms(await app.get(f"{API}/queues"), "GET", "/queues")
        refused(await app.post(f"{API}/jobs/{row.id}/cancel", headers=AUTH), 403, "read_only")
        refused(await app.get("/elsewhere"), 404, "not_found")


# -- mounted under a prefix -------------------------------------------------------------------


async def test_mounted_under_a_prefix_every_path_and_the_document_follow(
    aclient: wai.AsyncClient, world: World
) -> None:
    parent = Starlette(
        routes=[Mount("/admin", app=create_app(aclient, token=TOKEN, read_only=False))]
    )
    async with http(parent) as site:
        doc = (await site.get("/admin/api/v1/openapi.json")).json()
        assert [s["url"] for s in doc["servers"]] == ["/admin"]
        for path, ops in doc["paths"].items():
            if "get" in ops and "{" not in path:
                response = await site.get(doc["servers"][0]["url"] + path)
                assert response.status_code == 200, (path, response.text)
        paused = await site.post("/admin/api/v1/queues/q/pause", headers=AUTH)
        assert paused.json() == {"queue": "q", "paused": True}
        refused(await site.get("/admin/api/v1/nope"), 404, "not_found")
        assert (await site.get("/api/v1/jobs")).status_code == 404  # not at the root
    async with http(create_app(aclient)) as root:
        doc = (await root.get(f"{API}/openapi.json")).json()
        assert [s["url"] for s in doc["servers"]] == ["/"]
