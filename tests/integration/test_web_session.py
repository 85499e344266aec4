"""Browser sessions of the admin API on a real database: sign in with the token, then mutate
with the session cookie and its CSRF token.

A cookie and its CSRF header make every mutation succeed; the cookie alone, a wrong
CSRF token, the CSRF header alone, an expired or signed-out session are refused and
change nothing; read-only mode refuses sign-in; wrong tokens are rate-limited per client
address; the cookie is HttpOnly, SameSite=Strict, scoped to the mount point and Secure
over https.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from http.cookies import SimpleCookie
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import wai
from tests.integration.test_admin import make
from tests.integration.test_dlq import dead
from tests.integration.test_web_api import (
    API,
    AUTH,
    BASE,
    TOKEN,
    World,
    conforms,
    mutations,
    refused,
    snapshot,
    world_of,
)
from wai.web import create_app
from wai.web._routes import ROUTES
from wai.web._session import SIGN_IN_LIMIT

pytestmark = pytest.mark.timeout(120)


def browser(app: Any, *, base: str = BASE, address: str = "203.0.113.7") -> httpx.AsyncClient:
    """An httpx client that keeps cookies, as a browser at ``address`` would."""
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url=base)


@pytest.fixture
async def world(aclient: wai.AsyncClient) -> World:
    return await world_of(aclient)


@pytest.fixture
async def site(aclient: wai.AsyncClient) -> AsyncIterator[httpx.AsyncClient]:
    async with browser(create_app(aclient, token=TOKEN, read_only=False)) as client:
        yield client


def set_cookie(response: httpx.Response) -> SimpleCookie:
    [header] = response.headers.get_list("set-cookie")
    cookie = SimpleCookie()
    cookie.load(header)
    return cookie


async def sign_in(client: httpx.AsyncClient, prefix: str = "") -> str:
    """Sign in with the right token; the session's CSRF token."""
    response = await client.post(f"{prefix}{API}/session", json={"token": TOKEN})
    body = conforms(response, "POST", "/session")
    assert body["signed_in"] is True
    assert body["read_only"] is False
    return body["csrf"]


async def test_sign_in_sets_a_strict_http_only_cookie_and_answers_a_csrf_token(
    site: httpx.AsyncClient,
) -> None:
    before = conforms(await site.get(f"{API}/session"), "GET", "/session")
    assert before == {"read_only": False, "signed_in": False, "csrf": None}

    response = await site.post(f"{API}/session", json={"token": TOKEN})
    body = conforms(response, "POST", "/session")
    morsel = set_cookie(response)["wai_session"]
    assert len(morsel.value) >= 43  # 32 random bytes, base64url
    assert morsel["httponly"] is True
    assert morsel["samesite"].lower() == "strict"
    assert morsel["path"] == "/"
    assert morsel["secure"] == ""  # plain http: a Secure cookie would never come back
    assert int(morsel["max-age"]) == 12 * 3600
    assert len(body["csrf"]) >= 43
    assert body["csrf"] != morsel.value
    assert TOKEN not in response.text

    after = conforms(await site.get(f"{API}/session"), "GET", "/session")
    assert after == {"read_only": False, "signed_in": True, "csrf": body["csrf"]}

    again = await sign_in(site)  # a new sign-in replaces the session
    assert again != body["csrf"]


async def test_the_cookie_with_its_csrf_token_allows_every_mutation(
    aclient: wai.AsyncClient, world: World, site: httpx.AsyncClient
) -> None:
    csrf = await sign_in(site)
    for op, method, path, body in mutations(world):
        if op == "purgeDlqEntry":  # the bulk retry before it took the entry out of the DLQ
            path = f"/dlq/{(await dead(aclient, queue='dq')).id}"
        response = await site.request(method, API + path, json=body, headers={"X-CSRF-Token": csrf})
        documented = next(e for e in ROUTES if e.operation_id == op).path
        conforms(response, method, documented)


@pytest.mark.parametrize(
    "csrf",
    [None, "", "wrong", "x" * 43],
    ids=["no-header", "empty", "wrong", "wrong-same-length"],
)
async def test_the_cookie_without_its_csrf_token_is_403_and_changes_nothing(
    aclient: wai.AsyncClient, world: World, site: httpx.AsyncClient, csrf: str | None
) -> None:
    await sign_in(site)
    headers = {} if csrf is None else {"X-CSRF-Token": csrf}
    before = await snapshot(aclient)
    for _op, method, path, body in mutations(world):
        response = await site.request(method, API + path, json=body, headers=headers)
        assert "X-CSRF-Token" in refused(response, 403, "csrf_failed")["message"]
    assert await snapshot(aclient) == before


async def test_a_csrf_token_without_the_cookie_is_401(
    aclient: wai.AsyncClient, world: World, site: httpx.AsyncClient
) -> None:
    csrf = await sign_in(site)
    site.cookies.clear()
    before = await snapshot(aclient)
    for _op, method, path, body in mutations(world):
        response = await site.request(method, API + path, json=body, headers={"X-CSRF-Token": csrf})
        refused(response, 401, "unauthorized")
    # a cookie the server never issued, with a token it never issued
    site.cookies.set("wai_session", "forged-session-id")
    for _op, method, path, body in mutations(world)[:3]:
        response = await site.request(method, API + path, json=body, headers={"X-CSRF-Token": csrf})
        refused(response, 401, "unauthorized")
    assert await snapshot(aclient) == before


async def test_the_bearer_header_decides_alone_when_it_is_sent(
    aclient: wai.AsyncClient, site: httpx.AsyncClient
) -> None:
    row = await make(aclient, "available")
    csrf = await sign_in(site)
    wrong = {"X-CSRF-Token": csrf, "Authorization": "Bearer wrong"}
    refused(await site.post(f"{API}/jobs/{row.id}/cancel", headers=wrong), 401, "unauthorized")
    assert (await aclient.get_job(row.id)).state == "available"
    site.cookies.clear()
    ok = await site.post(f"{API}/jobs/{row.id}/cancel", headers=AUTH)  # scripts: unchanged
    assert conforms(ok, "POST", "/jobs/{job_id}/cancel")["state"] == "cancelled"


async def test_an_expired_session_is_401_and_shows_signed_out(aclient: wai.AsyncClient) -> None:
    row = await make(aclient, "available")
    app = create_app(aclient, token=TOKEN, read_only=False, session_ttl=0.3)
    async with browser(app) as site:
        csrf = await sign_in(site)
        kept = site.cookies["wai_session"]
        await asyncio.sleep(0.4)
        site.cookies.set("wai_session", kept)  # a browser that kept it past its Max-Age
        state = conforms(await site.get(f"{API}/session"), "GET", "/session")
        assert state == {"read_only": False, "signed_in": False, "csrf": None}
        response = await site.post(f"{API}/jobs/{row.id}/cancel", headers={"X-CSRF-Token": csrf})
        assert "expired" in refused(response, 401, "unauthorized")["message"]
    assert (await aclient.get_job(row.id)).state == "available"
    with pytest.raises(ValueError, match="session_ttl"):
        create_app(aclient, token=TOKEN, read_only=False, session_ttl=0)


async def test_sign_out_forgets_the_session_and_clears_the_cookie(
    aclient: wai.AsyncClient, site: httpx.AsyncClient
) -> None:
    row = await make(aclient, "available")
    csrf = await sign_in(site)
    old_cookie = site.cookies["wai_session"]
    out = await site.delete(f"{API}/session")
    assert conforms(out, "DELETE", "/session") == {
        "read_only": False,
        "signed_in": False,
        "csrf": None,
    }
    morsel = set_cookie(out)["wai_session"]
    assert (morsel.value, morsel["max-age"]) == ("", "0")
    assert morsel["path"] == "/"
    site.cookies.set("wai_session", old_cookie)  # a copy of the cookie kept from before
    response = await site.post(f"{API}/jobs/{row.id}/cancel", headers={"X-CSRF-Token": csrf})
    refused(response, 401, "unauthorized")
    assert (await aclient.get_job(row.id)).state == "available"
    conforms(await site.delete(f"{API}/session"), "DELETE", "/session")  # again: the same


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no-token", "with-token"])
async def test_read_only_refuses_sign_in(
    aclient: wai.AsyncClient, world: World, token: str | None
) -> None:
    async with browser(create_app(aclient, token=token)) as site:
        state = conforms(await site.get(f"{API}/session"), "GET", "/session")
        assert state == {"read_only": True, "signed_in": False, "csrf": None}
        response = await site.post(f"{API}/session", json={"token": TOKEN})
        refused(response, 403, "read_only")
        assert "set-cookie" not in response.headers
        before = await snapshot(aclient)
        for _op, method, path, body in mutations(world):
            refused(await site.request(method, API + path, json=body, headers=AUTH), 403)
        assert await snapshot(aclient) == before


async def test_a_wrong_token_is_401_and_sets_no_cookie(site: httpx.AsyncClient) -> None:
    for body in ({"token": "nope"}, {"token": TOKEN + "x"}, {"token": TOKEN[:-1]}):
        response = await site.post(f"{API}/session", json=body)
        refused(response, 401, "unauthorized")
        assert "set-cookie" not in response.headers
    for body, status in [
        ({}, 400),
        ({"token": ""}, 400),
        ({"token": 7}, 400),
        ({"token": TOKEN, "user": "x"}, 400),
    ]:
        response = await site.post(f"{API}/session", json=body)
        refused(response, status, "bad_request")
    state = conforms(await site.get(f"{API}/session"), "GET", "/session")
    assert state["signed_in"] is False


async def test_wrong_tokens_are_rate_limited_per_client_address(aclient: wai.AsyncClient) -> None:
    app = create_app(aclient, token=TOKEN, read_only=False)
    async with browser(app, address="198.51.100.1") as attacker:
        for _ in range(SIGN_IN_LIMIT):
            refused(await attacker.post(f"{API}/session", json={"token": "guess"}), 401)
        limited = await attacker.post(f"{API}/session", json={"token": "guess"})
        refused(limited, 429, "too_many_requests")
        assert 1 <= int(limited.headers["retry-after"]) <= 61
        # blocked means blocked: the right token gives nothing away either
        right = await attacker.post(f"{API}/session", json={"token": TOKEN})
        refused(right, 429, "too_many_requests")
        assert "set-cookie" not in right.headers
    async with browser(app, address="198.51.100.2") as neighbour:
        await sign_in(neighbour)


async def test_the_cookie_follows_the_mount_point_and_https(aclient: wai.AsyncClient) -> None:
    row = await make(aclient, "available")
    parent = Starlette(
        routes=[Mount("/admin", app=create_app(aclient, token=TOKEN, read_only=False))]
    )
    async with browser(parent, base="https://wai.test") as site:
        response = await site.post("/admin/api/v1/session", json={"token": TOKEN})
        morsel = set_cookie(response)["wai_session"]
        assert morsel["path"] == "/admin"
        assert morsel["secure"] is True
        csrf = response.json()["csrf"]
        cancelled = await site.post(
            f"/admin/api/v1/jobs/{row.id}/cancel", headers={"X-CSRF-Token": csrf}
        )
        assert cancelled.status_code == 200, cancelled.text
        out = set_cookie(await site.delete("/admin/api/v1/session"))["wai_session"]
        assert (out["path"], out["secure"]) == ("/admin", True)
