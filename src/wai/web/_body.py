"""Reading a mutation's JSON body: at most ``max_body`` bytes, ``application/json`` only.

Checked before the body is parsed, in this order: a malformed ``Content-Length``
(400), a declared or actual size over the cap (413, read no further), a body
that is not ``application/json`` (415), JSON that does not parse (400, orjson:
strict RFC 8259, UTF-8, no NaN, no lone surrogate). An empty body is ``{}``.
"""

from __future__ import annotations

from typing import Final

import orjson

from wai.web._errors import ApiError

try:
    from starlette.requests import Request
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("wai.web needs the http extra: pip install 'wai[http]'") from exc

__all__ = ["DEFAULT_MAX_BODY", "read_json"]

#: The largest request body accepted by default (bytes).
DEFAULT_MAX_BODY: Final = 64 * 1024


def _too_large(max_body: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"the body exceeds {max_body} bytes")


async def read_json(request: Request, max_body: int) -> object:
    """The request's JSON body; ``{}`` when it has none (``null`` is not "no body")."""
    length = request.headers.get("content-length")
    if length is not None:
        if not (length.isascii() and length.isdigit()):
            raise ApiError(400, "bad_request", "Content-Length must be a number of bytes")
        if int(length) > max_body:
            raise _too_large(max_body)
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = bytearray()
    async for chunk in request.stream():
        if chunk and media_type != "application/json":
            raise ApiError(
                415,
                "unsupported_media_type",
                "a request body must be JSON with Content-Type: application/json",
            )
        body += chunk
        if len(body) > max_body:  # a missing or lying Content-Length
            raise _too_large(max_body)
    if not body:
        return {}
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, "bad_request", f"the body is not valid JSON: {exc}") from None
