"""Who may mutate: read-only mode, and the bearer token or signed-in session mutations need.

Reads need no token. A mutation is refused with 403 in read-only mode whatever it
carries. Otherwise it needs either ``Authorization: Bearer <token>`` (scripts) or
the ``wai_session`` cookie of a signed-in browser together with that session's
``X-CSRF-Token`` header (:mod:`wai.web._session`). The bearer header, when sent,
decides alone. A missing or wrong token, or an unknown or expired session, is 401
(``WWW-Authenticate: Bearer``); a session cookie without its CSRF token is 403.
Tokens are compared in constant time and never appear in an answer, a log line or
a repr.
"""

from __future__ import annotations

import hashlib
import hmac

from wai.web._errors import ApiError
from wai.web._session import CSRF_HEADER, DEFAULT_SESSION_TTL, SessionStore, SignInLimiter

__all__ = ["Guard"]


def _digest(secret: bytes) -> bytes:
    # Compare digests, so that the time taken does not even tell the token's length.
    return hashlib.sha256(secret).digest()


class Guard:
    """The mutation policy of one app: read-only, or a token to present (or a session of it).

    ``sessions`` holds the app's signed-in browsers, ``sign_ins`` counts wrong
    tokens per client address.
    """

    __slots__ = ("_digest", "read_only", "sessions", "sign_ins")

    def __init__(
        self, *, token: str | None, read_only: bool, session_ttl: float = DEFAULT_SESSION_TTL
    ) -> None:
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
        self.sessions = SessionStore(session_ttl)
        self.sign_ins = SignInLimiter()

    def __repr__(self) -> str:
        return f"Guard(read_only={self.read_only})"

    def check(
        self,
        authorization: str | None,
        *,
        session_id: str | None = None,
        csrf: str | None = None,
    ) -> None:
        """Raise the 403 or 401 :class:`ApiError` unless a mutation with these credentials may
        run: the ``Authorization`` header, else the session cookie's value and the CSRF header.
        """
        self.refuse_if_read_only()
        if authorization is None and session_id:
            session = self.sessions.get(session_id)
            if session is None:
                raise ApiError(
                    401,
                    "unauthorized",
                    "the session has expired or was signed out: sign in again",
                    {"WWW-Authenticate": "Bearer"},
                )
            if not session.csrf_matches(csrf):
                raise ApiError(
                    403,
                    "csrf_failed",
                    f"a request with the session cookie needs the session's {CSRF_HEADER} header",
                )
            return
        presented = _bearer(authorization)
        if presented is None or not self._matches(presented):
            raise ApiError(
                401,
                "unauthorized",
                "this action needs the header 'Authorization: Bearer <token>' with the admin "
                "token, or a signed-in session",
                {"WWW-Authenticate": "Bearer"},
            )

    def refuse_if_read_only(self) -> None:
        """Raise the 403 :class:`ApiError` of read-only mode, if the app is read-only."""
        if self.read_only or self._digest is None:
            raise ApiError(
                403,
                "read_only",
                "this admin API is read-only: mutations are disabled (wai serve --token-env "
                "NAME, or create_app(client, token=..., read_only=False), enables them)",
            )

    def token_matches(self, token: str) -> bool:
        """Whether ``token`` (as typed, a str) is the admin token, compared in constant time."""
        return self._matches(token.encode("utf-8", "surrogatepass"))

    def _matches(self, presented: bytes) -> bool:
        return self._digest is not None and hmac.compare_digest(_digest(presented), self._digest)


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
