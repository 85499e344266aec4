"""``create_callback_app``: the Starlette app of ``POST /callbacks/{callback_id}/{action}``."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from psycopg_pool import PoolTimeout

from wai._client_base_async import AsyncTransaction
from wai._job import JobRow
from wai._logging import emit
from wai._translate import translate_errors
from wai.callbacks import _queries_async as callback_db
from wai.callbacks.ingress._body import CallbackBody, parse_body
from wai.callbacks.signing import (
    ACTIONS,
    DEFAULT_TOLERANCE,
    NONCE_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    InvalidSignature,
    check_secret,
    verify,
)
from wai.client import AsyncClient
from wai.errors import (
    CallbackNotFound,
    DatabaseError,
    FollowUpError,
    InvalidStateError,
    ValidationError,
)

try:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "wai.callbacks.ingress needs the http extra: pip install 'wai[http]'"
    ) from exc

__all__ = ["DEFAULT_MAX_BODY", "RETRY_AFTER", "create_callback_app"]

logger = logging.getLogger("wai.ingress")

#: The largest request body accepted by default (bytes).
DEFAULT_MAX_BODY = 64 * 1024

#: Seconds a 503 asks the sender to wait (``Retry-After``) before sending again.
RETRY_AFTER = 5

_JSON_TYPES = ("application/json",)

#: Seconds a remembered request outlives the freshness window's far edge (clock slack).
_REMEMBER_SLACK = 60.0


class _Replayed(Exception):
    """The signed request was already applied: refuse it (409), roll back."""


def create_callback_app(
    client: AsyncClient,
    *,
    secret: bytes | str,
    max_body: int = DEFAULT_MAX_BODY,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Starlette:
    """An ASGI app resolving external callbacks through ``client``, for signed requests only.

    One route, ``POST /callbacks/{callback_id}/{action}`` with ``action`` one of
    complete, fail, retry, resume, heartbeat; mount it in your own Starlette or
    FastAPI app, or run it with ``wai callbacks serve``. ``client`` must be open
    while the app serves; its registry's follow-up specs make resolutions atomic.

    Every request is checked before the database is touched: the body size
    (``max_body`` bytes, else 413), the JSON content type (415), the signature of
    :mod:`wai.callbacks.signing` with a timestamp within ``tolerance`` seconds (401),
    and the body's fields (400). Then, in one transaction with the resolution, the
    request's signature is remembered in ``<schema>.callback_requests`` until it
    could no longer pass the timestamp check: the same signed request again (a
    replay, from any process of the database) → 409. Unknown, stale or resolved id
    → 404; ``resume`` of a job parked by ``WaitForCallback`` → 409; a failing
    follow-up or any other exception of user code (the resolution rolled back) or
    an unavailable database → 503 with ``Retry-After``; success → 200
    ``{"job_id": ..., "state": ...}``.
    Errors are ``{"error": "..."}``. ``secret`` shorter than 32 bytes is a
    ``ValueError``.
    """
    key = check_secret(secret)
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise ValidationError(f"max_body must be a positive number of bytes, got {max_body!r}")
    if not tolerance > 0:
        raise ValidationError(f"tolerance must be > 0 seconds, got {tolerance!r}")
    ingress = _Ingress(client, key, max_body, float(tolerance))
    route = Route("/callbacks/{callback_id}/{action}", ingress.handle, methods=["POST"])
    app = Starlette(routes=[route])
    # A path that only misses its action ("/callbacks/x/") is a 404, not a 307 redirect.
    app.router.redirect_slashes = False
    return app


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class _Ingress:
    """The request handler of :func:`create_callback_app`, holding its settings."""

    def __init__(self, client: AsyncClient, secret: bytes, max_body: int, tolerance: float):
        self.client = client
        self.secret = secret
        self.max_body = max_body
        self.tolerance = tolerance

    async def handle(self, request: Request) -> Response:
        callback_id: str = request.path_params["callback_id"]
        action: str = request.path_params["action"]
        if action not in ACTIONS:
            return _error(404, f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type not in _JSON_TYPES:
            return _error(415, "the body must be JSON (Content-Type: application/json)")
        body = await self._read(request)
        if isinstance(body, Response):
            return body
        try:
            digest = verify(
                self.secret,
                callback_id,
                action,
                body,
                timestamp=request.headers.get(TIMESTAMP_HEADER),
                signature_header=request.headers.get(SIGNATURE_HEADER),
                nonce=request.headers.get(NONCE_HEADER),
                tolerance=self.tolerance,
            )
        except InvalidSignature as exc:
            emit(
                logger,
                logging.INFO,
                "callback request for %s refused: %s",
                action,
                exc,
                extra={"callback_id": callback_id, "callback_action": action},
            )
            return _error(401, str(exc))
        try:
            parsed = parse_body(action, body)
        except ValidationError as exc:
            return _error(400, str(exc))
        return await self._resolve(callback_id, parsed, bytes.fromhex(digest))

    async def _read(self, request: Request) -> bytes | Response:
        """The body, or the 400/413 response when it is malformed or too large."""
        length = request.headers.get("content-length")
        if length is not None:
            # isascii(): isdigit() also accepts digits such as "²", which int() refuses.
            if not length.isdigit() or not length.isascii():
                return _error(400, "Content-Length must be a number of bytes")
            if int(length) > self.max_body:
                return _error(413, f"the body exceeds {self.max_body} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_body:  # a missing or lying Content-Length
                return _error(413, f"the body exceeds {self.max_body} bytes")
        return bytes(body)

    async def _resolve(self, callback_id: str, parsed: CallbackBody, digest: bytes) -> Response:
        retry = {"Retry-After": str(RETRY_AFTER)}
        # The job is not known where the resolution failed: the callback id names it.
        extra = {"callback_id": callback_id, "callback_action": parsed.action}
        try:
            row = await self._apply(callback_id, parsed, digest)
        except _Replayed:
            emit(
                logger,
                logging.INFO,
                "callback %s refused: a replay of an applied request",
                parsed.action,
                extra=extra,
            )
            return _error(
                409,
                "this signed request was already applied (a replay); sign each request "
                f"with a fresh {NONCE_HEADER}",
            )
        except CallbackNotFound as exc:
            return _error(404, str(exc))
        except InvalidStateError as exc:
            return _error(409, str(exc))
        except ValidationError as exc:
            return _error(400, str(exc))
        except FollowUpError as exc:
            emit(
                logger,
                logging.WARNING,
                "callback %s rolled back: %s",
                parsed.action,
                exc,
                extra=extra,
            )
            return _error(503, f"a follow-up failed, nothing was changed: {exc}", retry)
        except (DatabaseError, psycopg.OperationalError, PoolTimeout) as exc:
            emit(
                logger,
                logging.WARNING,
                "callback %s: database error: %s",
                parsed.action,
                exc,
                extra=extra,
            )
            return _error(503, "the database is unavailable; send the request again", retry)
        except Exception as exc:
            # User code of the resolution (a follow-up closure, the args type) raised
            # something else: the transaction rolled back, so the sender may retry.
            emit(
                logger,
                logging.ERROR,
                "callback %s rolled back: unexpected error",
                parsed.action,
                exc_info=exc,
                extra=extra,
            )
            return _error(
                503,
                f"the resolution failed with {type(exc).__name__} (details in the server "
                "log) and was rolled back, nothing was changed; send the request again",
                retry,
            )
        body: dict[str, Any] = {"job_id": row.id, "state": row.state.value}
        return JSONResponse(body)

    async def _apply(self, callback_id: str, parsed: CallbackBody, digest: bytes) -> JobRow:
        """Remember the request and resolve, in one transaction: both or neither."""
        client = self.client
        async with client.transaction() as tx:
            with translate_errors(client.schema):
                # A timestamp passes for 2 x tolerance (from tolerance ahead to tolerance behind).
                fresh = await callback_db.callback_request_remember(
                    tx.connection,
                    client.schema,
                    digest=digest,
                    ttl=2 * self.tolerance + _REMEMBER_SLACK,
                )
            if not fresh:
                raise _Replayed
            return await self._call(tx, callback_id, parsed)

    async def _call(self, tx: AsyncTransaction, callback_id: str, parsed: CallbackBody) -> JobRow:
        client = self.client
        match parsed.action:
            case "complete":
                return await client.complete_external_in_tx(tx, callback_id, parsed.payload)
            case "fail":
                return await client.fail_external_in_tx(tx, callback_id, parsed.error)
            case "retry":
                return await client.retry_external_in_tx(tx, callback_id)
            case "resume":
                return await client.resume_external_in_tx(tx, callback_id, parsed.payload)
            case _:
                return await client.heartbeat_callback_in_tx(tx, callback_id, parsed.timeout)
