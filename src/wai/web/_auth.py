"""Who may mutate: read-only mode, and the bearer token that mutations need otherwise.

Reads need no token. A mutation is refused with 403 in read-only mode whatever the
token, and with 401 (``WWW-Authenticate: Bearer``) when its ``Authorization:
Bearer <token>`` header is missing or wrong. The token is compared in constant
time and never appears in an answer, a log line or a repr.
"""

from __future__ import annotations

import hashlib
import hmac

from wai.web._errors import ApiError

__all__ = ["Guard"]


def _digest(secret: bytes) -> bytes:
    # Compare digests, so that the time taken does not even tell the token's length.
    return hashlib.sha256(secret).digest()


class Guard:
    """The mutation policy of one app: read-only, or a token to present."""

    __slots__ = ("_digest", "read_only")

    def __init__(self, *, token: str | None, read_only: bool) -> None:
        if not isinstance(read_only, bool):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"read_only must be True or False, got {read_only!r}")
        if token is not None and (not isinstance(token, str) or not token.strip()):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError("token must be a non-empty string, or None")
        if not read_only and token is None:
            raise ValueError(
                "read_only=False needs a token: mutations are never open to anyone who can "
                "reach the app (pass token=..., or keep read_only=True)"
            )
        self.read_only = read_only
        self._digest = _digest(token.encode()) if token is not None else None

    def __repr__(self) -> str:
        return f"Guard(read_only={self.read_only})"

    def check(self, authorization: str | None) -> None:
        """Raise the 403 or 401 :class:`ApiError` unless a mutation with this header may run."""
        if self.read_only or self._digest is None:
            raise ApiError(
                403,
                "read_only",
                "this admin API is read-only: mutations are disabled (wai serve --token-env "
                "NAME, or create_app(client, token=..., read_only=False), enables them)",
            )
        presented = _bearer(authorization)
        if presented is None or not hmac.compare_digest(_digest(presented), self._digest):
            raise ApiError(
                401,
                "unauthorized",
                "this action needs the header 'Authorization: Bearer <token>' with the admin token",
                {"WWW-Authenticate": "Bearer"},
            )


def _bearer(header: str | None) -> bytes | None:
    """The credentials of an ``Authorization: Bearer ...`` header, as the bytes sent."""
    if header is None:
        return None
    scheme, _, credentials = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return None
    # ASGI servers decode header bytes as latin-1: encoding back gives the bytes sent, so a
    # UTF-8 token typed by a client matches token.encode().
    return credentials.strip().encode("latin-1")
