"""The admin API's OpenAPI document: valid, and the same set of operations as the routes.

The route table drives both the routing and the document; these tests hold the
three views (table, Starlette routes, document, and the endpoint table of
docs/ui.md) to one another, and check the pure parameter parsing and the
arguments of ``create_app`` without a database.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from openapi_spec_validator import validate
from starlette.routing import Route

import wai
from wai.errors import ValidationError
from wai.web import create_app
from wai.web._auth import Guard
from wai.web._errors import ApiError
from wai.web._openapi import document
from wai.web._params import (
    MAX_ID,
    Boolean,
    Integer,
    Kind,
    Param,
    Queue,
    Text,
    Timestamp,
    parse_body,
    parse_query,
)
from wai.web._params_flow import COUNT, Nullable, RateLimitObject
from wai.web._routes import ROUTES
from wai.web._session import SessionStore, SignInLimiter

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = "postgresql://nobody@127.0.0.1:1/none"  # never connected to: nothing here opens it


@pytest.fixture
def client() -> wai.AsyncClient:
    return wai.AsyncClient(NOWHERE)


def _operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}


@pytest.mark.parametrize("root_path", ["", "/admin", "/deep/er/wai"])
def test_the_document_is_valid_openapi_3_1(root_path: str) -> None:
    doc = document(ROUTES, root_path)
    validate(doc)
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["version"] == wai.__version__
    assert doc["servers"][0]["url"] == (root_path or "/")


def test_every_route_is_in_the_document_and_nothing_else() -> None:
    table = {(e.method, e.full_path) for e in ROUTES}
    assert len(table) == len(ROUTES), "a method and path listed twice"
    assert _operations(document(ROUTES, "")) == table


def test_the_app_routes_exactly_the_table(client: wai.AsyncClient) -> None:
    app = create_app(client)
    routed: set[tuple[str, str]] = set()
    for route in app.routes:
        assert isinstance(route, Route)
        if route.name in ("ui", "ui_asset"):  # the web UI's files, not the API
            assert route.path in ("/", "/ui/{path:path}")
            continue
        path = re.sub(r"\{(\w+):path\}", r"{\1}", route.path)
        routed |= {(m, path) for m in (route.methods or ()) if m != "HEAD"}
    assert routed == _operations(document(ROUTES, ""))
    assert {r.path for r in create_app(client, ui=False).routes if isinstance(r, Route)} == {
        re.sub(r"\{(\w+)\}", lambda m: m[0], e.route_path) for e in ROUTES
    }


def test_operation_ids_are_unique_and_components_are_there() -> None:
    doc = document(ROUTES, "")
    ids = [op["operationId"] for ops in doc["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    schemas = doc["components"]["schemas"]
    for name in (
        "Job",
        "Trigger",
        "QueueStats",
        "DlqEntry",
        "Schedule",
        "OutboxEntry",
        "OutboxStats",
        "RuntimeInstance",
        "Error",
    ):
        assert name in schemas, name
    assert schemas["Schedule"]["properties"]["next_fire_at"] == {
        "anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]
    }


def test_path_parameters_match_the_templates() -> None:
    for endpoint in ROUTES:
        in_path = re.findall(r"\{(\w+)\}", endpoint.path)
        assert in_path == [p.name for p in endpoint.path_params], endpoint.operation_id


def test_mutations_and_only_they_need_the_token_or_a_session() -> None:
    doc = document(ROUTES, "")
    for endpoint in ROUTES:
        op = doc["paths"][endpoint.full_path][endpoint.method.lower()]
        assert op["x-wai-mutates"] is endpoint.mutates
        if endpoint.mutates:
            assert op["security"] == [
                {"bearerAuth": []},
                {"sessionCookie": [], "csrfToken": []},
            ]
            assert {"401", "403", "413", "415"} <= set(op["responses"])
            assert endpoint.method != "GET"
        else:
            assert "security" not in op
            # signing in and out changes no job: the session endpoints are the exception
            assert endpoint.method == "GET" or endpoint.full_path == "/api/v1/session"
        assert {"200", "400", "503"} <= set(op["responses"])
    schemes = doc["components"]["securitySchemes"]
    assert schemes["sessionCookie"] == {
        "type": "apiKey",
        "in": "cookie",
        "name": "wai_session",
        "description": schemes["sessionCookie"]["description"],
    }
    assert (schemes["csrfToken"]["in"], schemes["csrfToken"]["name"]) == ("header", "X-CSRF-Token")
    sign_in = doc["paths"]["/api/v1/session"]["post"]
    assert {"401", "403", "429"} <= set(sign_in["responses"])
    assert sign_in["requestBody"]["content"]["application/json"]["schema"]["required"] == ["token"]


def test_docs_ui_lists_every_endpoint_with_its_client_method() -> None:
    text = (ROOT / "docs" / "ui.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    for endpoint in ROUTES:
        key = f"`{endpoint.method} {endpoint.full_path}`"
        [row] = [r for r in rows if r.startswith(f"| {key} |")] or [None]
        assert row is not None, f"docs/ui.md has no row for {key}"
        if endpoint.calls != "(none)":
            assert f"`{endpoint.calls}`" in row, f"docs/ui.md: {key} does not name {endpoint.calls}"
    assert len(rows) >= len(ROUTES)


# -- create_app's arguments and the guard ------------------------------------------------------


def test_read_only_false_needs_a_token(client: wai.AsyncClient) -> None:
    with pytest.raises(ValueError, match="needs a token"):
        create_app(client, read_only=False)
    with pytest.raises(ValueError, match="non-empty"):
        create_app(client, token="", read_only=False)
    with pytest.raises(TypeError, match="read_only"):
        create_app(client, token="t", read_only="no")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="max_body"):
        create_app(client, max_body=0)
    create_app(client, token="t", read_only=False)
    create_app(client, token="t")  # a token with read-only: still read-only


def test_the_guard_refuses_and_never_shows_the_token() -> None:
    guard = Guard(token="sekrit-token-value", read_only=False)
    assert "sekrit" not in repr(guard)
    guard.check("Bearer sekrit-token-value")
    guard.check("BEARER   sekrit-token-value  ")
    for header in (
        None,
        "",
        "Bearer",
        "Bearer x",
        "Basic sekrit-token-value",
        "sekrit-token-value",
    ):
        with pytest.raises(ApiError) as refused:
            guard.check(header)
        assert refused.value.status == 401
        assert refused.value.headers == {"WWW-Authenticate": "Bearer"}
        assert "sekrit" not in refused.value.message
    read_only = Guard(token="sekrit-token-value", read_only=True)
    with pytest.raises(ApiError) as forbidden:
        read_only.check("Bearer sekrit-token-value")
    assert forbidden.value.status == 403


def test_the_guard_takes_a_session_with_its_csrf_token() -> None:
    guard = Guard(token="sekrit-token-value", read_only=False)
    session_id, session = guard.sessions.create()
    guard.check(None, session_id=session_id, csrf=session.csrf)
    for csrf in (None, "", "nope", session.csrf + "x"):
        with pytest.raises(ApiError) as forbidden:
            guard.check(None, session_id=session_id, csrf=csrf)
        assert (forbidden.value.status, forbidden.value.code) == (403, "csrf_failed")
    for unknown in ("nope", session.csrf):
        with pytest.raises(ApiError) as refused:
            guard.check(None, session_id=unknown, csrf=session.csrf)
        assert refused.value.status == 401
    with pytest.raises(ApiError) as wrong_bearer:  # the header, when sent, decides alone
        guard.check("Bearer nope", session_id=session_id, csrf=session.csrf)
    assert wrong_bearer.value.status == 401
    assert "sekrit" not in repr(guard.sessions)
    assert session.csrf not in repr(session)
    guard.sessions.delete(session_id)
    with pytest.raises(ApiError):
        guard.check(None, session_id=session_id, csrf=session.csrf)
    assert guard.token_matches("sekrit-token-value")
    assert not guard.token_matches("sekrit-token-valu")


def test_sessions_expire_and_sign_in_failures_are_counted_per_address() -> None:
    now = [1000.0]
    store = SessionStore(ttl=60, clock=lambda: now[0])
    first, _ = store.create()
    now[0] += 59
    assert store.get(first) is not None
    second, _ = store.create()
    now[0] += 2
    assert store.get(first) is None
    assert store.get(second) is not None
    assert store.get(None) is None
    assert store.get("") is None

    limiter = SignInLimiter(limit=3, window=60, clock=lambda: now[0])
    for _ in range(3):
        assert limiter.retry_after("a") is None
        limiter.failed("a")
    assert limiter.retry_after("a") == 61
    assert limiter.retry_after("b") is None
    now[0] += 30
    assert limiter.retry_after("a") == 31
    now[0] += 31
    assert limiter.retry_after("a") is None  # the window passed: the address may try again


def test_a_utf8_token_matches_the_bytes_a_client_sends() -> None:
    guard = Guard(token="clé-secrète", read_only=False)
    as_received = "clé-secrète".encode().decode("latin-1")  # how ASGI servers decode headers
    guard.check(f"Bearer {as_received}")


# -- parameters ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        " 1",
        "1 ",
        "+1",
        "1.0",
        "1e3",
        "0x1",
        "1_000",
        "\u0661\u0662",
        "--1",
        "0",
        str(MAX_ID + 1),
    ],
)
def test_ids_in_urls_are_plain_ascii_integers_in_range(text: str) -> None:
    with pytest.raises(ValidationError, match="job_id"):
        Integer(1, MAX_ID).from_text("job_id", text)


def test_integers_parse_and_check_bounds() -> None:
    ids = Integer(1, MAX_ID)
    assert ids.from_text("id", str(MAX_ID)) == MAX_ID
    assert ids.from_text("id", "007") == 7
    with pytest.raises(ValidationError, match="from 1 to"):
        ids.from_text("id", "9" * 5000)  # refused without converting
    for value in (True, 1.0, "1", None):
        with pytest.raises(ValidationError):
            Integer(1, 4).from_json("priority", value)
    assert Integer(1, 4).from_json("priority", 4) == 4


@pytest.mark.parametrize("value", ["", "x" * 201, "a\x00b", "\ud800", 7, None, ["a"]])
def test_text_refuses_what_postgresql_cannot_store_or_is_no_string(value: object) -> None:
    with pytest.raises(ValidationError, match="kind"):
        Text().from_json("kind", value)


def test_queue_names_timestamps_and_booleans() -> None:
    assert Queue().from_text("queue", "a.b:c-d_1") == "a.b:c-d_1"
    for bad in ("a b", "", "x" * 201, "é"):
        with pytest.raises(ValidationError, match="queue"):
            Queue().from_text("queue", bad)
    assert Timestamp().from_json("run_at", "2030-01-01T00:00:00Z").year == 2030
    for bad in ("2030-01-01T00:00:00", "tomorrow", 5, "9" * 100):
        with pytest.raises(ValidationError, match="run_at"):
            Timestamp().from_json("run_at", bad)
    for bad in ("true", 1, None):
        with pytest.raises(ValidationError, match="all"):
            Boolean().from_json("all", bad)


def test_kind_names_are_checked_as_wai_checks_every_kind() -> None:
    assert Kind().from_text("kind", "billing.charge:v2-x_1") == "billing.charge:v2-x_1"
    assert Kind().from_json("kind", "charge") == "charge"
    for bad in ("a b", "", "x" * 201, "é", "a/b", "a\x00b", "\ud800"):
        with pytest.raises(ValidationError, match=r"^kind: invalid job kind"):
            Kind().from_text("kind", bad)
    with pytest.raises(ValidationError, match="kind must be a string, got int"):
        Kind().from_json("kind", 7)
    pattern = re.compile(Kind().schema()["pattern"])
    assert pattern.match("billing.charge:v2-x_1")
    assert not pattern.match("a b")
    assert not pattern.match("x" * 201)


def test_query_strings_are_strict() -> None:
    params = (Param(name="limit", type=Integer(1, 1000), default=100, description="n"),)
    assert parse_query(params, []) == {"limit": 100}
    assert parse_query(params, [("limit", "5")]) == {"limit": 5}
    with pytest.raises(ValidationError, match="unknown query parameter 'lmit'"):
        parse_query(params, [("lmit", "5")])
    with pytest.raises(ValidationError, match="more than once"):
        parse_query(params, [("limit", "5"), ("limit", "5")])


def test_bodies_are_json_objects_of_known_fields() -> None:
    fields = (Param(name="all", type=Boolean(), default=False, description="all"),)
    assert parse_body(fields, {}) == {"all": False}
    assert parse_body(fields, {"all": True}) == {"all": True}
    for body in (None, [], "x", 1):
        with pytest.raises(ValidationError, match="JSON object"):
            parse_body(fields, body)
    with pytest.raises(ValidationError, match="unknown field"):
        parse_body(fields, {"all": True, "x": 1})
    with pytest.raises(ValidationError, match="unknown field"):
        parse_body((), {"reason": "x"})


def test_rate_limit_objects_and_nullable_counts() -> None:
    rate = RateLimitObject()
    assert rate.from_json("rate_limit", {"limit": 50}) == wai.RateLimit(50)
    assert rate.from_json("rate_limit", {"limit": 5, "per": 60, "burst": None}) == wai.RateLimit(
        5, per=60.0
    )
    assert rate.from_json("r", {"limit": 5, "per": 0.5, "burst": 2}) == wai.RateLimit(
        5, per=0.5, burst=2
    )
    for bad, message in [
        ({"limit": 5, "per": float("nan")}, "r.per must be a number of seconds"),
        ({"limit": 5, "per": float("inf")}, "r.per must be a number of seconds"),
        ({"limit": 5, "per": 0.0009}, "from 0.001 to 86400"),
        ({"limit": 5, "per": 86_401}, "from 0.001 to 86400"),
        ({"limit": 5, "burst": True}, "r.burst must be an integer"),
        ({"limit": 1_000_001}, "r.limit must be from 1 to 1000000"),
        ({"limit": 5, 1: 2}, "unknown field 1 in r"),
        ({"burst": 5}, "r.limit is required"),
        (5, "r must be an object"),
    ]:
        with pytest.raises(ValidationError, match=re.escape(message)):
            rate.from_json("r", bad)
    with pytest.raises(ValidationError, match="JSON object in the body"):
        rate.from_text("r", "50")
    count = Nullable(COUNT)
    assert count.from_json("n", None) is None
    assert count.from_json("n", 7) == 7
    assert count.from_text("n", "7") == 7
    with pytest.raises(ValidationError, match="n must be from 1"):
        count.from_json("n", 0)
    assert count.schema() == {
        "anyOf": [{"type": "integer", "minimum": 1, "maximum": 1_000_000}, {"type": "null"}]
    }


def test_the_limits_body_requires_both_fields_and_documents_the_rate_limit() -> None:
    op = document(ROUTES, "")["paths"]["/api/v1/queues/{name}/limits"]["put"]
    schema = op["requestBody"]["content"]["application/json"]["schema"]
    assert op["requestBody"]["required"] is True
    assert schema["required"] == ["rate_limit", "global_concurrency"]
    [rate, null] = schema["properties"]["rate_limit"]["anyOf"]
    assert null == {"type": "null"}
    assert rate["required"] == ["limit"]
    assert rate["additionalProperties"] is False
    assert (rate["properties"]["per"]["minimum"], rate["properties"]["per"]["maximum"]) == (
        0.001,
        86_400,
    )
    assert op["x-wai-mutates"] is True


def test_the_kind_limit_body_requires_its_rate_limit_and_names_queue_and_kind() -> None:
    op = document(ROUTES, "")["paths"]["/api/v1/queues/{name}/kinds/{kind}/limit"]["put"]
    schema = op["requestBody"]["content"]["application/json"]["schema"]
    assert op["requestBody"]["required"] is True
    assert schema["required"] == ["rate_limit"]
    assert schema["additionalProperties"] is False
    [rate, null] = schema["properties"]["rate_limit"]["anyOf"]
    assert null == {"type": "null"}
    assert (rate["required"], rate["additionalProperties"]) == (["limit"], False)
    params = {p["name"]: p for p in op["parameters"]}
    assert set(params) == {"name", "kind"}
    assert all(p["in"] == "path" and p["required"] for p in params.values())
    assert params["kind"]["schema"] == Kind().schema()
    assert op["x-wai-mutates"] is True
    assert op["operationId"] == "setKindRateLimit"
