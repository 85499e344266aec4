"""The web UI's files as the admin app serves them: the page at the root, its assets under
``/ui/``, each with the security headers, wherever the app is mounted."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import wai
from tests.integration.test_web_api import API, TOKEN, http, refused
from wai.web import create_app
from wai.web._ui import CONTENT_SECURITY_POLICY, UI_DIR

pytestmark = pytest.mark.timeout(60)

SECURITY = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
}


def secured(response: httpx.Response) -> None:
    for name, value in SECURITY.items():
        assert response.headers[name] == value, name


def test_the_policy_is_the_strict_one() -> None:
    assert CONTENT_SECURITY_POLICY == (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )


async def test_the_page_and_its_assets_are_served_with_the_security_headers(
    aclient: wai.AsyncClient,
) -> None:
    async with http(create_app(aclient, token=TOKEN, read_only=False)) as app:
        page = await app.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert '<script type="module" src="ui/js/main.js"></script>' in page.text
        secured(page)
        for path, media in [
            ("ui/js/main.js", "text/javascript; charset=utf-8"),
            ("ui/js/api.js", "text/javascript; charset=utf-8"),
            ("ui/style.css", "text/css; charset=utf-8"),
            ("ui/favicon.svg", "image/svg+xml"),
        ]:
            asset = await app.get("/" + path)
            assert asset.status_code == 200, path
            assert asset.headers["content-type"] == media
            assert asset.content == (UI_DIR / path.removeprefix("ui/")).read_bytes()
            secured(asset)
            again = await app.get("/" + path, headers={"If-None-Match": asset.headers["etag"]})
            assert again.status_code == 304
            assert again.content == b""
        assert (await app.head("/")).status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/ui/nope.js",
        "/ui/",
        "/ui/js",
        "/ui/../_app.py",
        "/ui/%2e%2e/_app.py",
        "/ui/js/../../_ui.py",
        "/ui//etc/passwd",
        "/ui/index.html%00.js",
        "/index.html",
    ],
)
async def test_only_the_ui_files_are_served(aclient: wai.AsyncClient, path: str) -> None:
    async with http(create_app(aclient)) as app:
        response = await app.get(path)
        refused(response, 404, "not_found")
        assert "import" not in response.text


async def test_mounted_under_a_prefix_the_page_is_at_the_mount_point(
    aclient: wai.AsyncClient,
) -> None:
    parent = Starlette(routes=[Mount("/admin", app=create_app(aclient))])
    async with http(parent) as site:
        page = await site.get("/admin/")
        assert page.status_code == 200
        secured(page)
        assert (await site.get("/admin/ui/js/main.js")).status_code == 200
        assert (await site.get("/ui/js/main.js")).status_code == 404
        assert (await site.get("/admin/api/v1/session")).json()["read_only"] is True


async def test_ui_false_serves_the_api_alone(aclient: wai.AsyncClient) -> None:
    async with http(create_app(aclient, ui=False)) as app:
        refused(await app.get("/"), 404, "not_found")
        refused(await app.get("/ui/js/main.js"), 404, "not_found")
        assert (await app.get(f"{API}/queues")).status_code == 200
