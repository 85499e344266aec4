"""``create_app``: the Starlette app of the admin API, routed and checked from the route table."""

from __future__ import annotations

from typing import Any

from wai.client import AsyncClient
from wai.errors import ValidationError
from wai.web._auth import Guard
from wai.web._body import DEFAULT_MAX_BODY, read_json
from wai.web._encode import json_response
from wai.web._endpoint import Call, Endpoint
from wai.web._errors import ApiError, api_error
from wai.web._params import parse_body, parse_path, parse_query
from wai.web._routes import ROUTES
from wai.web._session import COOKIE, CSRF_HEADER, DEFAULT_SESSION_TTL
from wai.web._ui import ui_routes

try:
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("wai.web needs the http extra: pip install 'wai[http]'") from exc

__all__ = ["create_app"]


def create_app(
    client: AsyncClient,
    *,
    token: str | None = None,
    read_only: bool = True,
    max_body: int = DEFAULT_MAX_BODY,
    ui: bool = True,
    session_ttl: float = DEFAULT_SESSION_TTL,
) -> Starlette:
    """The admin HTTP API of ``client``: JSON under ``/api/v1/``, described at
    ``/api/v1/openapi.json``, and its web UI at the app's root.

    Mount it in your own Starlette or FastAPI app (``app.mount("/wai",
    create_app(client))``) or run it with ``wai serve``. Every path and URL it
    answers is relative to where it is mounted. It neither opens nor closes
    ``client``: the host application owns it (a closed client opens on first use).

    Reads need no token. With ``read_only=True`` (the default) every mutation
    answers 403, whatever the token. With ``read_only=False`` mutations need
    ``Authorization: Bearer <token>`` (else 401 with ``WWW-Authenticate:
    Bearer``); a ``token`` is then required, so mutations are never open:
    ``ValueError`` without one. Request bodies are JSON objects of at most
    ``max_body`` bytes (else 413). Errors are ``{"error": {"code": ...,
    "message": ...}}``: 400 for malformed input (unknown query parameters too),
    404 for an unknown job, entry, schedule or outbox row, 409 for an action the
    state does not allow, 503 while the database is unreachable.

    A browser signs in with the token (``POST /api/v1/session``) and gets a
    session cookie that lasts ``session_ttl`` seconds (12 hours); a mutation with
    the cookie also needs the session's ``X-CSRF-Token`` header. ``ui=False``
    serves the API alone, without the web UI (``GET /`` and ``/ui/...``).
    """
    guard = Guard(token=token, read_only=read_only, session_ttl=session_ttl)
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValidationError(f"max_body must be a positive number of bytes, got {max_body!r}")
    routes = [
        Route(
            endpoint.route_path,
            _handle(endpoint, client, guard, max_body),
            methods=[endpoint.method],
            name=endpoint.operation_id,
        )
        for endpoint in ROUTES
    ]
    if ui:
        routes += ui_routes()
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    # "/api/v1/jobs/" is a 404, not a redirect to a URL the app would have to build.
    app.router.redirect_slashes = False
    return app


def _handle(endpoint: Endpoint, client: AsyncClient, guard: Guard, max_body: int) -> Any:
    """The request handler of ``endpoint``: check, call, answer; every error as JSON."""
    where = f"{endpoint.method} {endpoint.full_path}"

    async def handle(request: Request) -> Response:
        try:
            if endpoint.mutates:  # before anything else is read: refused means untouched
                guard.check(
                    request.headers.get("authorization"),
                    session_id=request.cookies.get(COOKIE),
                    csrf=request.headers.get(CSRF_HEADER),
                )
            args = parse_path(endpoint.path_params, request.path_params)
            args |= parse_query(endpoint.query, request.query_params.multi_items())
            if endpoint.body is not None:
                args |= parse_body(endpoint.body, await read_json(request, max_body))
            call = Call(client, args, str(request.scope.get("root_path", "")), request, guard)
            result = await endpoint.handler(call)
        except Exception as exc:
            error = api_error(exc, where)
            return json_response(error.body(), error.status, error.headers)
        return result if isinstance(result, Response) else json_response(result)

    return handle


def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own errors (no such path: 404, wrong method: 405), as JSON."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        error = ApiError(404, "not_found", f"no such endpoint: {request.url.path}")
    elif exc.status_code == 405:
        error = ApiError(
            405,
            "method_not_allowed",
            f"{request.method} is not allowed on {request.url.path}",
            dict(exc.headers or {}),
        )
    else:
        error = ApiError(exc.status_code, "http_error", exc.detail, dict(exc.headers or {}))
    return json_response(error.body(), error.status, error.headers)
