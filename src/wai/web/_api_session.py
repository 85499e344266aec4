"""Browser sessions: sign in with the admin token, see the session, sign out.

``POST /api/v1/session`` checks the token (constant time; wrong ones counted per
client address, 429 past the limit) and sets the ``wai_session`` cookie:
``HttpOnly``, ``SameSite=Strict``, its ``Path`` the app's mount point, ``Secure``
when the request came over https. The answer holds the session's CSRF token,
which the browser sends back in ``X-CSRF-Token`` with each mutation.
"""

from __future__ import annotations

import math
from typing import Any

from wai.web._encode import json_response
from wai.web._endpoint import Call
from wai.web._errors import ApiError
from wai.web._session import COOKIE, Session

try:
    from starlette.responses import Response
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("wai.web needs the http extra: pip install 'wai[http]'") from exc

__all__ = ["create_session", "delete_session", "get_session"]


def _state(call: Call, session: Session | None) -> dict[str, Any]:
    return {
        "read_only": call.guard.read_only,
        "signed_in": session is not None,
        "csrf": session.csrf if session is not None else None,
    }


def _cookie_options(call: Call) -> dict[str, Any]:
    return {
        "path": call.root_path or "/",
        "secure": call.request.url.scheme == "https",
        "httponly": True,
        "samesite": "strict",
    }


async def get_session(call: Call) -> dict[str, Any]:
    """Whether the app is read-only, and whether this browser is signed in (its CSRF token)."""
    guard = call.guard
    session = None if guard.read_only else guard.sessions.get(call.request.cookies.get(COOKIE))
    return _state(call, session)


async def create_session(call: Call) -> Response:
    """Sign in with the admin token: a new session, its cookie set, its CSRF token answered."""
    guard = call.guard
    guard.refuse_if_read_only()
    client = call.request.client
    address = client.host if client is not None else "unknown"
    wait = guard.sign_ins.retry_after(address)
    if wait is not None:
        raise ApiError(
            429,
            "too_many_requests",
            f"too many wrong tokens from this address: try again in {wait} seconds",
            {"Retry-After": str(wait)},
        )
    if not guard.token_matches(call.args["token"]):
        guard.sign_ins.failed(address)
        raise ApiError(
            401, "unauthorized", "that is not the admin token", {"WWW-Authenticate": "Bearer"}
        )
    guard.sessions.delete(call.request.cookies.get(COOKIE))  # a sign-in replaces the old one
    session_id, session = guard.sessions.create()
    response = json_response(_state(call, session))
    response.set_cookie(
        COOKIE, session_id, max_age=math.ceil(guard.sessions.ttl), **_cookie_options(call)
    )
    return response


async def delete_session(call: Call) -> Response:
    """Sign out: forget the session and clear its cookie (signed out already: the same)."""
    call.guard.sessions.delete(call.request.cookies.get(COOKIE))
    response = json_response(_state(call, None))
    response.delete_cookie(COOKIE, **_cookie_options(call))
    return response
