"""The HTTP callback ingress against a real database: every action, every refusal, follow-ups.

Requests go through ``httpx.ASGITransport`` to ``create_callback_app(aclient, ...)``;
jobs are parked through the database seam of ``test_callbacks.py``. Every refused
request must leave the job row exactly as it was.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pydantic
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.routing import Mount

import wai
from tests.integration._helpers import count, fetch
from tests.integration.test_callbacks import Pay, Receipt, claimed, parked, waiting_in_place
from wai.callbacks.ingress import RETRY_AFTER, create_callback_app
from wai.callbacks.ingress._body import parse_body
from wai.callbacks.signing import (
    NONCE_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    callback_url,
    sign,
)

SECRET = b"ingress-test-secret-0123456789abcdef"
BASE = "http://wai.test"


def body_of(value: Any) -> bytes:
    return json.dumps(value).encode()


@pytest.fixture
async def http(aclient: wai.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client talking to the ingress app of ``aclient`` in process."""
    app = create_callback_app(aclient, secret=SECRET)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
        yield client


async def post(
    http: httpx.AsyncClient,
    callback_id: uuid.UUID | str,
    action: str,
    body: bytes = b"{}",
    *,
    secret: bytes = SECRET,
    timestamp: int | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """A request signed with ``secret`` (overridden by ``headers``)."""
    signed = sign(secret, callback_id, action, body, timestamp=timestamp)
    return await http.post(
        callback_url(BASE, callback_id, action), content=body, headers={**signed, **(headers or {})}
    )


async def snapshot(client: wai.AsyncClient) -> tuple[Any, ...]:
    """Every job row, the outbox and the job count: what a refused request must not change."""
    jobs = await fetch(client, "SELECT * FROM wai.jobs ORDER BY id")
    outbox = await fetch(client, "SELECT * FROM wai.outbox")
    return jobs, outbox, await count(client)


# -- every action -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "body", "state"),
    [
        ("complete", {"payload": {"paid": 12}}, "completed"),
        ("complete", {}, "completed"),
        ("fail", {"error": "declined"}, "failed"),
        ("retry", {}, "available"),
        ("resume", {"payload": [1, "two"]}, "running"),
        ("heartbeat", {"timeout": 7200}, "waiting_external"),
    ],
)
async def test_every_action_resolves_a_parked_job(
    aclient: wai.AsyncClient, http: httpx.AsyncClient, action: str, body: Any, state: str
) -> None:
    # resume answers a handler waiting in place; the other actions a parked job
    row, cid = await (waiting_in_place(aclient) if action == "resume" else parked(aclient))
    response = await post(http, cid, action, body_of(body))
    assert response.status_code == 200, response.text
    assert response.json() == {"job_id": row.id, "state": state}
    after = await aclient.get_job(row.id)
    assert after.state == state
    if action == "complete":
        assert after.callback_result == body.get("payload")
    elif action == "fail":
        assert after.errors[-1]["error"] == "declined"
    elif action == "resume":
        assert after.callback_result == [1, "two"]
    elif action == "heartbeat":
        assert after.callback_id == cid
        assert after.callback_timeout_at is not None
        assert row.callback_timeout_at is not None
        assert (after.callback_timeout_at - row.callback_timeout_at).total_seconds() > 3000
    again = await post(http, cid, action, body_of(body))
    if action == "heartbeat":  # a heartbeat keeps the callback
        assert again.status_code == 200
    else:  # the id is spent: the resolution never applies twice
        assert again.status_code == 404
        assert "error" in again.json()
        assert await aclient.get_job(row.id) == after


async def test_complete_commits_the_followup_in_the_same_transaction(
    aclient: wai.AsyncClient, http: httpx.AsyncClient
) -> None:
    aclient.on_completed_enqueue(Pay, lambda args, job: Receipt(order=args.order), name="r")
    row, cid = await parked(aclient)
    response = await post(http, cid, "complete", body_of({"payload": "ok"}))
    assert response.status_code == 200
    [receipt] = await aclient.list_jobs(trigger_job_id=row.id)
    assert receipt.kind == "receipt"
    assert await fetch(aclient, "SELECT * FROM wai.outbox") == []


async def test_complete_applies_to_a_running_job_that_has_not_parked_yet(
    aclient: wai.AsyncClient, http: httpx.AsyncClient
) -> None:
    row, cid = await claimed(aclient)
    response = await post(http, cid, "complete", b'{"payload": 1}')
    assert response.json() == {"job_id": row.id, "state": "completed"}


async def test_the_app_mounts_under_a_prefix(aclient: wai.AsyncClient) -> None:
    row, cid = await parked(aclient)
    outer = Starlette(routes=[Mount("/hooks", create_callback_app(aclient, secret=SECRET))])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=outer)) as http:
        body = b'{"error": "declined"}'
        response = await http.post(
            callback_url(f"{BASE}/hooks", cid, "fail"),
            content=body,
            headers=sign(SECRET, cid, "fail", body),
        )
    assert response.json() == {"job_id": row.id, "state": "failed"}


# -- refused: signature ---------------------------------------------------------------------


async def test_bad_signatures_are_refused_and_change_nothing(
    aclient: wai.AsyncClient, http: httpx.AsyncClient
) -> None:
    _row, cid = await parked(aclient)
    before = await snapshot(aclient)
    # A minute past the ±300 s window on either side: the requests before take real time,
    # so a second past the edge could fall back inside it (the edge is a unit test's job).
    now = int(time.time())
    body = body_of({"payload": 1})
    good = sign(SECRET, cid, "complete", body)
    url = callback_url(BASE, cid, "complete")
    cases: list[tuple[str, httpx.Response]] = [
        ("forged", await post(http, cid, "complete", body, secret=b"f" * 32)),
        ("stale", await post(http, cid, "complete", body, timestamp=now - 360)),
        ("future", await post(http, cid, "complete", body, timestamp=now + 360)),
        (
            "no signature",
            await http.post(url, content=body, headers={**good, SIGNATURE_HEADER: ""}),
        ),
        (
            "missing signature",
            await http.post(
                url, content=body, headers={k: v for k, v in good.items() if k != SIGNATURE_HEADER}
            ),
        ),
        (
            "missing timestamp",
            await http.post(
                url, content=body, headers={k: v for k, v in good.items() if k != TIMESTAMP_HEADER}
            ),
        ),
        ("other body", await http.post(url, content=body_of({"payload": 2}), headers=good)),
        (
            "other action",
            await http.post(
                callback_url(BASE, cid, "fail"), content=b'{"error": "x"}', headers=good
            ),
        ),
        (
            "other id",
            await http.post(
                callback_url(BASE, uuid.uuid4(), "complete"), content=body, headers=good
            ),
        ),
        (
            "garbage",
            await http.post(
                url,
                content=body,
                headers={**good, SIGNATURE_HEADER: "v1=zz", TIMESTAMP_HEADER: "yesterday"},
            ),
        ),
    ]
    for name, response in cases:
        assert response.status_code == 401, (name, response.text)
        assert response.json()["error"], name
    assert await snapshot(aclient) == before


async def test_a_request_replayed_outside_the_window_is_refused(
    aclient: wai.AsyncClient, http: httpx.AsyncClient
) -> None:
    row, cid = await parked(aclient)
    body = b'{"payload": "captured"}'
    captured = sign(SECRET, cid, "complete", body, timestamp=int(time.time()) - 10)
    url = callback_url(BASE, cid, "complete")
    strict = create_callback_app(aclient, secret=SECRET, tolerance=5)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=strict)) as late:
        before = await snapshot(aclient)
        response = await late.post(url, content=body, headers=captured)
        assert response.status_code == 401
        assert "window" in response.json()["error"]
        assert await snapshot(aclient) == before
    # Inside the window the same request applies, once; its replay is refused.
    assert (await http.post(url, content=body, headers=captured)).status_code == 200
    replay = await http.post(url, content=body, headers=captured)
    assert replay.status_code == 409
    assert "replay" in replay.json()["error"]
    assert (await aclient.get_job(row.id)).callback_result == "captured"


@pytest.mark.parametrize("version", ["v1", "v2"])
async def test_a_replayed_heartbeat_is_refused_by_every_ingress_of_the_database(
    aclient: wai.AsyncClient, http: httpx.AsyncClient, version: str
) -> None:
    """A heartbeat never spends its id: without a memory of applied requests, a captured
    one could push the callback's timeout out again and again within the window."""
    row, cid = await parked(aclient)
    body = b'{"timeout": 3600}'
    captured = sign(SECRET, cid, "heartbeat", body, nonce=version == "v2")
    url = callback_url(BASE, cid, "heartbeat")
    assert (await http.post(url, content=body, headers=captured)).status_code == 200
    # time passes: the timeout is near again when the attacker replays the request
    await fetch(
        aclient,
        "UPDATE wai.jobs SET callback_timeout_at = now() + interval '1 minute' WHERE id = %s",
        (row.id,),
    )
    before = await snapshot(aclient)
    other = create_callback_app(aclient, secret=SECRET)  # another process, same database
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=other)) as elsewhere:
        for sender in (http, elsewhere):
            replay = await sender.post(url, content=body, headers=captured)
            assert replay.status_code == 409, replay.text
            assert "already applied" in replay.json()["error"]
    assert await snapshot(aclient) == before  # the timeout did not move
    # a new request of the sender (a fresh nonce) still works
    fresh = sign(SECRET, cid, "heartbeat", body)
    assert fresh[NONCE_HEADER] != captured.get(NONCE_HEADER)
    assert (await http.post(url, content=body, headers=fresh)).status_code == 200


async def test_remembered_requests_expire_and_are_deleted_by_later_ones(
    aclient: wai.AsyncClient, http: httpx.AsyncClient
) -> None:
    _row, cid = await parked(aclient)
    await fetch(
        aclient,
        "INSERT INTO wai.callback_requests (digest, expires_at)"
        " SELECT sha256(i::text::bytea), now() - interval '1 second'"
        " FROM generate_series(1, 150) AS i",
    )
    response = await post(http, cid, "heartbeat", b'{"timeout": 60}')
    assert response.status_code == 200
    # 100 expired ones deleted by this insert, the request itself remembered
    assert await fetch(aclient, "SELECT count(*) FROM wai.callback_requests") == [(51,)]
    live = "SELECT count(*) FROM wai.callback_requests WHERE expires_at > now() + interval '600s'"
    assert await fetch(aclient, live) == [(1,)]  # kept past twice the 300 s window


# -- refused: id, size, type, body ------------------------------------------------------------


async def test_unknown_ids_and_actions_are_404(
    aclient: wai.AsyncClient, http: httpx.AsyncClient
) -> None:
    _row, cid = await parked(aclient)
    before = await snapshot(aclient)
    for bad in [uuid.uuid4(), "not-a-uuid", "'; DROP TABLE wai.jobs; --", "x" * 500]:
        response = await post(http, bad, "complete")
        assert response.status_code == 404, response.text
        assert "callback with id" in response.json()["error"]
    headers = sign(SECRET, cid, "complete", b"{}")
    response = await http.post(f"{BASE}/callbacks/{cid}/delete", content=b"{}", headers=headers)
    assert response.status_code == 404
    assert "unknown action" in response.json()["error"]
    assert (await http.get(callback_url(BASE, cid, "complete"))).status_code == 405
    assert await snapshot(aclient) == before


async def test_oversized_bodies_are_413(aclient: wai.AsyncClient) -> None:
    _row, cid = await parked(aclient)
    before = await snapshot(aclient)
    app = create_callback_app(aclient, secret=SECRET, max_body=100)
    body = body_of({"payload": "x" * 200})
    headers = sign(SECRET, cid, "complete", body)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted while reading
        for i in range(0, len(body), 10):
            yield body[i : i + 10]

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as http:
        url = callback_url(BASE, cid, "complete")
        declared = await http.post(url, content=body, headers=headers)
        streamed = await http.post(url, content=chunks(), headers=headers)
        lying = await http.post(url, content=body, headers={**headers, "Content-Length": "50"})
        bad_length = await http.post(url, content=b"{}", headers={"Content-Length": "-1"})
    assert declared.status_code == 413
    assert "exceeds 100 bytes" in declared.json()["error"]
    assert "content-length" not in streamed.request.headers
    assert streamed.status_code == 413
    assert lying.status_code == 413
    assert bad_length.status_code in (400, 415)
    assert await snapshot(aclient) == before


async def test_bad_bodies_are_400_and_other_types_415(
    aclient: wai.AsyncClient, http: httpx.AsyncClient
) -> None:
    _row, cid = await parked(aclient)
    before = await snapshot(aclient)
    for action, body, message in [
        ("complete", b"{not json", "not valid JSON"),
        ("complete", b"", "not valid JSON"),
        ("complete", b"[1]", "must be a JSON object"),
        ("complete", b'{"payload": 1, "extra": 2}', "unknown field 'extra'"),
        ("complete", b'{"payload": "\\u0000"}', "NUL"),
        ("fail", b"{}", "needs the field 'error'"),
        ("fail", b'{"error": null}', "error must be a string"),
        ("heartbeat", b'{"timeout": -1}', "timeout must be"),
        ("retry", b'{"payload": 1}', "unknown field"),
    ]:
        response = await post(http, cid, action, body)
        assert response.status_code == 400, (body, response.text)
        assert message in response.json()["error"]
    for content_type in ["text/plain", "application/x-www-form-urlencoded", ""]:
        response = await post(http, cid, "complete", headers={"Content-Type": content_type})
        assert response.status_code == 415
    mixed_case = {"Content-Type": "Application/JSON; charset=utf-8"}
    ok = await post(http, cid, "heartbeat", b'{"timeout": 60}', headers=mixed_case)
    assert ok.status_code == 200
    jobs, outbox, n = await snapshot(aclient)
    assert (outbox, n) == (before[1], before[2])  # only the heartbeat's timeout moved
    assert len(jobs) == 1


# -- follow-ups ---------------------------------------------------------------------------------


async def test_a_failing_followup_is_503_then_the_retry_succeeds_once(
    aclient: wai.AsyncClient, http: httpx.AsyncClient
) -> None:
    broken = True

    def receipt(args: Pay, job: wai.JobRow) -> Receipt:
        if broken:
            raise RuntimeError("mail server down")
        return Receipt(order=args.order)

    aclient.on_completed_enqueue(Pay, receipt, name="receipt")
    row, cid = await parked(aclient)
    before = await snapshot(aclient)
    body = body_of({"payload": {"paid": 1}})
    headers = sign(SECRET, cid, "complete", body)
    url = callback_url(BASE, cid, "complete")
    response = await http.post(url, content=body, headers=headers)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == str(RETRY_AFTER)
    assert "mail server down" in response.json()["error"]
    assert await snapshot(aclient) == before
    after = await aclient.get_job(row.id)
    assert (after.state, after.callback_id) == ("waiting_external", cid)

    broken = False  # the closure is fixed; the sender redelivers the same request
    response = await http.post(url, content=body, headers=headers)
    assert response.status_code == 200
    assert response.json() == {"job_id": row.id, "state": "completed"}
    assert len(await aclient.list_jobs(trigger_job_id=row.id)) == 1
    assert (await http.post(url, content=body, headers=headers)).status_code == 409  # replay
    assert (await post(http, cid, "complete", body)).status_code == 404  # a new one: spent
    assert len(await aclient.list_jobs(trigger_job_id=row.id)) == 1


class Invoice(pydantic.BaseModel):
    """A follow-up whose (user-written) serializer raises: not a FollowUpError."""

    order: int

    @pydantic.field_serializer("order")
    def _order(self, value: int) -> int:
        raise RuntimeError("serializer bug")


async def test_an_unexpected_error_of_user_code_is_503_and_changes_nothing(
    aclient: wai.AsyncClient, http: httpx.AsyncClient
) -> None:
    aclient.on_completed_enqueue(Pay, lambda args, job: Invoice(order=args.order), name="inv")
    row, cid = await parked(aclient)
    before = await snapshot(aclient)
    body = body_of({"payload": 1})
    headers = sign(SECRET, cid, "complete", body)
    url = callback_url(BASE, cid, "complete")
    response = await http.post(url, content=body, headers=headers)
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == str(RETRY_AFTER)
    error = response.json()["error"]
    assert "PydanticSerializationError" in error
    assert "nothing was changed" in error  # a FollowUpError naming the spec and the cause
    assert await snapshot(aclient) == before
    # nothing was remembered either: the same request may be redelivered
    assert await fetch(aclient, "SELECT count(*) FROM wai.callback_requests") == [(0,)]
    assert (await aclient.get_job(row.id)).callback_id == cid


async def test_resume_of_a_parked_job_is_409_and_changes_nothing(
    aclient: wai.AsyncClient, http: httpx.AsyncClient
) -> None:
    row, cid = await parked(aclient)
    before = await snapshot(aclient)
    response = await post(http, cid, "resume", b'{"payload": 1}')
    assert response.status_code == 409
    assert "complete_external" in response.json()["error"]
    assert await snapshot(aclient) == before
    assert (await post(http, cid, "complete", b'{"payload": 1}')).status_code == 200
    assert (await aclient.get_job(row.id)).state == "completed"


# -- settings -------------------------------------------------------------------------------------


def test_create_callback_app_checks_its_settings() -> None:
    client = wai.AsyncClient("postgresql://unused@127.0.0.1:1/none")
    with pytest.raises(ValueError, match="at least 32 bytes"):
        create_callback_app(client, secret=b"x" * 31)
    with pytest.raises(ValueError, match="max_body"):
        create_callback_app(client, secret=SECRET, max_body=0)
    with pytest.raises(ValueError, match="tolerance"):
        create_callback_app(client, secret=SECRET, tolerance=0)


# -- property: garbage never hurts ----------------------------------------------------------------


class Harness:
    """A parked job, a client and the ingress app on an event loop of the test's own.

    Hypothesis drives a plain function, so the async calls run on an
    ``asyncio.Runner`` instead of pytest-asyncio's loop.
    """

    def __init__(self, database_url: str) -> None:
        self.runner = asyncio.Runner()
        self.client = wai.AsyncClient(database_url, max_connections=2)
        self.runner.run(self.client.open())
        self.job, self.cid = self.runner.run(parked(self.client))
        self.app = create_callback_app(self.client, secret=SECRET, max_body=1024)

    def close(self) -> None:
        try:
            self.runner.run(self.client.close())
        finally:
            self.runner.close()

    async def request(self, path: str, body: bytes, headers: list[tuple[bytes, bytes]]) -> int:
        transport = httpx.ASGITransport(app=self.app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as http:
            response = await http.post(path, content=body, headers=headers)
        return response.status_code


@pytest.fixture
def harness(database_url: str) -> Iterator[Harness]:
    h = Harness(database_url)
    try:
        yield h
    finally:
        h.close()


_ID_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
_HEADER = st.binary(max_size=80).filter(lambda b: b"\r" not in b and b"\n" not in b)


ACTIONS = ["complete", "fail", "retry", "resume", "heartbeat"]

_JSONISH = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
_OBJECTS = st.dictionaries(
    st.sampled_from(["payload", "error", "timeout", "extra"]), _JSONISH, max_size=3
).map(lambda fields: json.dumps(fields).encode())


@st.composite
def garbage(draw: st.DrawFn, cid: str) -> tuple[str, str, bytes, dict[str, bytes], bool]:
    """(callback id, action, body, header overrides, sign properly?)."""
    callback_id = draw(st.one_of(st.just(cid), st.uuids().map(str), _ID_TEXT))
    garbled = draw(st.integers(0, 4)) == 0
    action = draw(_ID_TEXT if garbled else st.sampled_from(ACTIONS))
    body = draw(st.one_of(st.binary(max_size=2048), _OBJECTS))
    overrides = draw(
        st.dictionaries(
            st.sampled_from([TIMESTAMP_HEADER, SIGNATURE_HEADER, "Content-Type", "Content-Length"]),
            _HEADER,
            max_size=2,
        )
    )
    return callback_id, action, body, overrides, draw(st.booleans())


def _valid(action: str, body: bytes) -> bool:
    """Whether the ingress accepts ``body`` for ``action`` (then a signed request could apply)."""
    try:
        parse_body(action, body)
    except wai.ValidationError:
        return False
    return True


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_garbage_is_refused_with_4xx_and_never_changes_the_job(
    harness: Harness, data: st.DataObject
) -> None:
    callback_id, action, body, overrides, signed = data.draw(garbage(str(harness.cid)))
    headers: dict[str, bytes] = {"Content-Type": b"application/json"}
    if signed and action in ACTIONS:
        if callback_id == str(harness.cid) and _valid(action, body):
            return  # a valid request for the parked job: nothing garbage about it
        headers.update({k: v.encode() for k, v in sign(SECRET, callback_id, action, body).items()})
    headers.update(overrides)
    path = f"/callbacks/{quote(callback_id, safe='')}/{quote(action, safe='')}"
    status = harness.runner.run(
        harness.request(path, body, [(k.encode(), v) for k, v in headers.items()])
    )
    event(f"status {status}")
    assert 400 <= status < 500, (callback_id, action, body, overrides, status)
    assert harness.runner.run(harness.client.get_job(harness.job.id)) == harness.job
