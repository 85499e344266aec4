"""Signing and verifying HTTP callback requests: pure functions, no I/O, no web framework.

The HTTP ingress (:mod:`wai.ingress`) accepts ``POST /callbacks/{callback_id}/{action}``
only with two headers::

    X-Wai-Timestamp: <unix seconds, an integer>
    X-Wai-Signature: v1=<hex of HMAC-SHA256(secret, signed bytes)>

where the signed bytes are ``f"{timestamp}.{callback_id}.{action}.".encode() + body``:
the timestamp header's text, the callback id exactly as it appears in the path (after
percent-decoding), the action, each followed by a dot, then the raw request body. The
secret is at least :data:`MIN_SECRET_BYTES` bytes, shared with the sender. A timestamp
more than ``tolerance`` seconds away from the receiver's clock is refused, so a captured
request cannot be replayed outside that window.

The sender (an outside system, or a test) builds the headers with :func:`sign` and the
address with :func:`callback_url`; the ingress checks them with :func:`verify`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from urllib.parse import quote
from uuid import UUID

from wai.errors import ValidationError, WaiError

__all__ = [
    "ACTIONS",
    "DEFAULT_TOLERANCE",
    "MIN_SECRET_BYTES",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "InvalidSignature",
    "callback_url",
    "check_secret",
    "sign",
    "signature",
    "verify",
]

#: The actions of ``POST /callbacks/{callback_id}/{action}``.
ACTIONS: tuple[str, ...] = ("complete", "fail", "retry", "resume", "heartbeat")

#: The header carrying the signing time, in integer unix seconds.
TIMESTAMP_HEADER = "X-Wai-Timestamp"

#: The header carrying ``v1=<hex HMAC-SHA256>``.
SIGNATURE_HEADER = "X-Wai-Signature"

#: The shortest secret accepted: 32 bytes (256 bits, the size of the HMAC-SHA256 output).
MIN_SECRET_BYTES = 32

#: How far (seconds) a request's timestamp may be from the receiver's clock, either way.
DEFAULT_TOLERANCE = 300.0

_TIMESTAMP = re.compile(r"[0-9]{1,15}")
_SIGNATURE = re.compile(r"v1=([0-9a-fA-F]{64})")


class InvalidSignature(WaiError):
    """A callback request's timestamp or signature is missing, malformed, stale or wrong."""


def check_secret(secret: object) -> bytes:
    """``secret`` as bytes if it is bytes of at least :data:`MIN_SECRET_BYTES`.

    Raises :class:`wai.ValidationError` (a ``ValueError``) otherwise.
    """
    if not isinstance(secret, bytes | bytearray):
        raise ValidationError(f"the callback secret must be bytes, got {type(secret).__name__}")
    if len(secret) < MIN_SECRET_BYTES:
        raise ValidationError(
            f"the callback secret must be at least {MIN_SECRET_BYTES} bytes, got {len(secret)}"
            " (e.g. secrets.token_hex(32))"
        )
    return bytes(secret)


def _check_action(action: str) -> str:
    if action not in ACTIONS:
        raise ValidationError(f"action must be one of {', '.join(ACTIONS)}, got {action!r}")
    return action


def signature(
    secret: bytes, callback_id: str | UUID, action: str, body: bytes, timestamp: int | str
) -> str:
    """The hex HMAC-SHA256 of ``f"{timestamp}.{callback_id}.{action}.".encode() + body``."""
    message = f"{timestamp}.{callback_id}.{action}.".encode() + body
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def sign(
    secret: bytes,
    callback_id: str | UUID,
    action: str,
    body: bytes,
    timestamp: int | None = None,
) -> dict[str, str]:
    """The headers of a signed callback request: timestamp, signature and JSON content type.

    ``timestamp`` defaults to now (integer unix seconds); ``body`` is the exact bytes
    to send.
    """
    key = check_secret(secret)
    ts = int(time.time()) if timestamp is None else int(timestamp)
    digest = signature(key, str(callback_id), _check_action(action), body, ts)
    return {
        TIMESTAMP_HEADER: str(ts),
        SIGNATURE_HEADER: f"v1={digest}",
        "Content-Type": "application/json",
    }


def callback_url(base_url: str, callback_id: str | UUID, action: str) -> str:
    """``{base_url}/callbacks/{callback_id}/{action}``, the id percent-encoded."""
    cid = quote(str(callback_id), safe="")
    return f"{base_url.rstrip('/')}/callbacks/{cid}/{_check_action(action)}"


def verify(
    secret: bytes,
    callback_id: str,
    action: str,
    body: bytes,
    *,
    timestamp: str | None,
    signature_header: str | None,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> None:
    """Check a request's headers; raises :class:`InvalidSignature` saying what is wrong.

    ``timestamp`` and ``signature_header`` are the values of :data:`TIMESTAMP_HEADER`
    and :data:`SIGNATURE_HEADER` (None when absent). The digests are compared in
    constant time.
    """
    if timestamp is None:
        raise InvalidSignature(f"missing {TIMESTAMP_HEADER} header")
    if _TIMESTAMP.fullmatch(timestamp) is None:
        raise InvalidSignature(f"{TIMESTAMP_HEADER} must be integer unix seconds")
    current = time.time() if now is None else now
    if abs(current - int(timestamp)) > tolerance:
        raise InvalidSignature(
            f"{TIMESTAMP_HEADER} is outside the ±{tolerance:g}s window of the receiver's clock"
        )
    if signature_header is None:
        raise InvalidSignature(f"missing {SIGNATURE_HEADER} header")
    match = _SIGNATURE.fullmatch(signature_header.strip())
    if match is None:
        raise InvalidSignature(f"{SIGNATURE_HEADER} must be 'v1=<64 hex digits>'")
    expected = signature(secret, callback_id, action, body, timestamp)
    if not hmac.compare_digest(expected, match[1].lower()):
        raise InvalidSignature("signature does not match")
