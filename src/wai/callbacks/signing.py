"""Signing and verifying HTTP callback requests: pure functions, no I/O, no web framework.

The HTTP ingress (:mod:`wai.callbacks.ingress`) accepts ``POST /callbacks/{callback_id}/{action}``
only with these headers::

    X-Wai-Timestamp: <unix seconds, an integer>
    X-Wai-Nonce: <16 to 128 characters of A-Z a-z 0-9 _ ->      (v2 only)
    X-Wai-Signature: v2=<hex of HMAC-SHA256(secret, signed bytes)>

Two versions of the signature exist. ``v2`` (what :func:`sign` makes) signs
``f"{timestamp}.{nonce}.{callback_id}.{action}.".encode() + body``; ``v1`` (no nonce
header, still accepted) signs ``f"{timestamp}.{callback_id}.{action}.".encode() + body``:
the timestamp header's text, the nonce header's text, the callback id exactly as it
appears in the path (after percent-decoding), the action, each followed by a dot, then
the raw request body. The secret is at least :data:`MIN_SECRET_BYTES` bytes, shared with
the sender. A timestamp more than ``tolerance`` seconds away from the receiver's clock is
refused, so a captured request cannot be replayed outside that window; inside it, the
ingress remembers every signature it applied (in PostgreSQL) and refuses the same one
again. The nonce makes two identical requests sent in the same second distinct.

The sender (an outside system, or a test) builds the headers with :func:`sign` and the
address with :func:`callback_url`; the ingress checks them with :func:`verify`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from urllib.parse import quote
from uuid import UUID

from wai.errors import ValidationError, WaiError

__all__ = [
    "ACTIONS",
    "DEFAULT_TOLERANCE",
    "MIN_SECRET_BYTES",
    "NONCE_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "InvalidSignature",
    "callback_url",
    "check_secret",
    "new_nonce",
    "sign",
    "signature",
    "verify",
]

#: The actions of ``POST /callbacks/{callback_id}/{action}``.
ACTIONS: tuple[str, ...] = ("complete", "fail", "retry", "resume", "heartbeat")

#: The header carrying the signing time, in integer unix seconds.
TIMESTAMP_HEADER = "X-Wai-Timestamp"

#: The header carrying ``v2=<hex HMAC-SHA256>`` (``v1=`` without a nonce).
SIGNATURE_HEADER = "X-Wai-Signature"

#: The header carrying the request's nonce (signature ``v2``): unique per request.
NONCE_HEADER = "X-Wai-Nonce"

#: The shortest secret accepted: 32 bytes (256 bits, the size of the HMAC-SHA256 output).
MIN_SECRET_BYTES = 32

#: How far (seconds) a request's timestamp may be from the receiver's clock, either way.
DEFAULT_TOLERANCE = 300.0

# Bounded digits: a huge number is refused before int() parses it.
_TIMESTAMP = re.compile(r"[0-9]{1,15}")
_SIGNATURE = re.compile(r"(v[12])=([0-9a-fA-F]{64})")
_NONCE = re.compile(r"[A-Za-z0-9_-]{16,128}")


class InvalidSignature(WaiError):
    """A callback request's timestamp or signature is missing, malformed, stale or wrong."""


def check_secret(secret: object) -> bytes:
    """``secret`` as bytes if it holds at least :data:`MIN_SECRET_BYTES` bytes.

    A ``str`` (``secrets.token_hex(32)``, an environment variable) is taken as its
    UTF-8 bytes. Raises :class:`wai.ValidationError` (a ``ValueError``) otherwise.
    """
    if isinstance(secret, str):
        try:
            secret = secret.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(
                "the callback secret is not valid text (a lone surrogate)"
            ) from None
    if not isinstance(secret, bytes | bytearray):
        raise ValidationError(
            f"the callback secret must be bytes or str, got {type(secret).__name__}"
        )
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
    secret: bytes,
    callback_id: str | UUID,
    action: str,
    body: bytes,
    timestamp: int | str,
    nonce: str | None = None,
) -> str:
    """The hex HMAC-SHA256 of a request's signed bytes.

    ``f"{timestamp}.{nonce}.{callback_id}.{action}.".encode() + body`` with a nonce
    (signature ``v2``), ``f"{timestamp}.{callback_id}.{action}.".encode() + body``
    without one (``v1``).
    """
    head = f"{timestamp}." if nonce is None else f"{timestamp}.{nonce}."
    message = f"{head}{callback_id}.{action}.".encode() + body
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def new_nonce() -> str:
    """A fresh random nonce for :data:`NONCE_HEADER` (22 URL-safe characters)."""
    return secrets.token_urlsafe(16)


def sign(
    secret: bytes | str,
    callback_id: str | UUID,
    action: str,
    body: bytes,
    timestamp: int | None = None,
    *,
    nonce: str | bool = True,
) -> dict[str, str]:
    """The headers of a signed callback request: timestamp, nonce, signature, content type.

    ``timestamp`` defaults to now (integer unix seconds); ``body`` is the exact bytes
    to send. ``nonce=True`` (the default) draws a random nonce and signs ``v2``; a
    string is used as the nonce (16 to 128 characters of ``A-Za-z0-9_-``);
    ``nonce=False`` makes the older ``v1`` signature, without a nonce. Send each
    request with a fresh nonce: the ingress refuses a signature it already applied,
    so a retry of the *same* request after a ``5xx`` is fine, but two distinct
    requests must differ.
    """
    key = check_secret(secret)
    ts = int(time.time()) if timestamp is None else int(timestamp)
    headers = {TIMESTAMP_HEADER: str(ts)}
    if nonce is False:
        value = None
        version = "v1"
    else:
        value = new_nonce() if nonce is True else _check_nonce(nonce)
        headers[NONCE_HEADER] = value
        version = "v2"
    digest = signature(key, str(callback_id), _check_action(action), body, ts, value)
    headers[SIGNATURE_HEADER] = f"{version}={digest}"
    headers["Content-Type"] = "application/json"
    return headers


def _check_nonce(nonce: object) -> str:
    if not isinstance(nonce, str) or _NONCE.fullmatch(nonce) is None:
        raise ValidationError(f"a nonce is 16 to 128 characters of A-Z a-z 0-9 _ -, got {nonce!r}")
    return nonce


def callback_url(base_url: str, callback_id: str | UUID, action: str) -> str:
    """``{base_url}/callbacks/{callback_id}/{action}``, the id percent-encoded."""
    cid = quote(str(callback_id), safe="")
    return f"{base_url.rstrip('/')}/callbacks/{cid}/{_check_action(action)}"


def verify(
    secret: bytes | str,
    callback_id: str,
    action: str,
    body: bytes,
    *,
    timestamp: str | None,
    signature_header: str | None,
    nonce: str | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> str:
    """Check a request's headers; raises :class:`InvalidSignature` saying what is wrong.

    ``timestamp``, ``signature_header`` and ``nonce`` are the values of
    :data:`TIMESTAMP_HEADER`, :data:`SIGNATURE_HEADER` and :data:`NONCE_HEADER` (None
    when absent): with a nonce the signature must be ``v2``, without one ``v1``. The
    digests are compared in constant time. Returns the verified digest (lowercase
    hex), which identifies the request: a receiver remembers it to refuse replays.
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
        raise InvalidSignature(
            f"{SIGNATURE_HEADER} must be 'v2=<64 hex digits>' (or 'v1=...' without a nonce)"
        )
    if nonce is not None and _NONCE.fullmatch(nonce) is None:
        raise InvalidSignature(f"{NONCE_HEADER} must be 16 to 128 characters of A-Za-z0-9_-")
    version = "v1" if nonce is None else "v2"
    if match[1] != version:
        raise InvalidSignature(
            f"a {match[1]} signature {'needs' if match[1] == 'v2' else 'takes no'} "
            f"{NONCE_HEADER} header"
        )
    expected = signature(check_secret(secret), callback_id, action, body, timestamp, nonce)
    # hexdigest() is lowercase; the header's hex may come in either case.
    if not hmac.compare_digest(expected, match[2].lower()):
        raise InvalidSignature("signature does not match")
    return expected
