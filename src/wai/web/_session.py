"""Browser sessions of the admin API: signed-in cookies with a CSRF token, and the sign-in limit.

A browser signs in once with the admin token (``POST /api/v1/session``) and gets a
``wai_session`` cookie: a random 32-byte id kept here, in the memory of the process,
until it expires or the browser signs out. A mutation sent with that cookie must
also carry the session's CSRF token in ``X-CSRF-Token`` (a page of another site
can make a browser send the cookie, never read the token). Sessions are not shared
between processes and do not survive a restart: signing in again is the remedy.

Wrong tokens are counted per client address; past :data:`SIGN_IN_LIMIT` within
:data:`SIGN_IN_WINDOW` seconds, sign-in answers 429 until the window has passed, so
the token cannot be guessed by trying.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "COOKIE",
    "CSRF_HEADER",
    "DEFAULT_SESSION_TTL",
    "SIGN_IN_LIMIT",
    "SIGN_IN_WINDOW",
    "Session",
    "SessionStore",
    "SignInLimiter",
]

#: The name of the session cookie.
COOKIE: Final = "wai_session"

#: The header a cookie-authenticated mutation carries its CSRF token in.
CSRF_HEADER: Final = "X-CSRF-Token"

#: Seconds a session lasts after sign-in (12 hours).
DEFAULT_SESSION_TTL: Final = 12 * 3600.0

#: Wrong tokens one client address may send within :data:`SIGN_IN_WINDOW` seconds.
SIGN_IN_LIMIT: Final = 10

#: The window (seconds) in which :data:`SIGN_IN_LIMIT` wrong tokens are counted.
SIGN_IN_WINDOW: Final = 60.0

# Bounds on what an anonymous caller can make this process remember.
_MAX_SESSIONS: Final = 10_000
_MAX_ADDRESSES: Final = 10_000


def _key(session_id: str) -> bytes:
    # Sessions are stored by digest: the ids themselves are never kept.
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True, slots=True)
class Session:
    """One signed-in browser: its CSRF token and when it expires (monotonic seconds)."""

    csrf: str
    expires_at: float

    def __repr__(self) -> str:
        return f"Session(expires_at={self.expires_at:.0f})"

    def csrf_matches(self, presented: str | None) -> bool:
        """Whether ``presented`` is this session's CSRF token (compared in constant time)."""
        if presented is None:
            return False
        return hmac.compare_digest(
            presented.encode("utf-8", "surrogatepass"), self.csrf.encode("ascii")
        )


class SessionStore:
    """The signed-in sessions of one app, in memory, each until its expiry."""

    __slots__ = ("_clock", "_sessions", "ttl")

    def __init__(self, ttl: float = DEFAULT_SESSION_TTL, clock: Callable[[], float] | None = None):
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"session_ttl must be a positive number of seconds, got {ttl!r}")
        self.ttl = float(ttl)
        self._clock = clock or time.monotonic
        self._sessions: OrderedDict[bytes, Session] = OrderedDict()

    def __repr__(self) -> str:
        return f"SessionStore(ttl={self.ttl}, sessions={len(self._sessions)})"

    def create(self) -> tuple[str, Session]:
        """A new session: its id (the cookie's value, never stored) and the session."""
        now = self._clock()
        self._expire(now)
        while len(self._sessions) >= _MAX_SESSIONS:
            self._sessions.popitem(last=False)  # the oldest sign-in goes first
        session_id = secrets.token_urlsafe(32)
        session = Session(csrf=secrets.token_urlsafe(32), expires_at=now + self.ttl)
        self._sessions[_key(session_id)] = session
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of this cookie value, or None (unknown, signed out or expired)."""
        if not session_id:
            return None
        key = _key(session_id)
        session = self._sessions.get(key)
        if session is None:
            return None
        if session.expires_at <= self._clock():
            del self._sessions[key]
            return None
        return session

    def delete(self, session_id: str | None) -> None:
        """Forget the session of this cookie value, if any (signing out)."""
        if session_id:
            self._sessions.pop(_key(session_id), None)

    def _expire(self, now: float) -> None:
        # Sessions are stored in creation order with one ttl: the expired ones lead.
        while self._sessions:
            key, session = next(iter(self._sessions.items()))
            if session.expires_at > now:
                break
            del self._sessions[key]


class SignInLimiter:
    """Counts wrong tokens per client address within a sliding window."""

    __slots__ = ("_clock", "_failures", "limit", "window")

    def __init__(
        self,
        limit: int = SIGN_IN_LIMIT,
        window: float = SIGN_IN_WINDOW,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock or time.monotonic
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, address: str) -> int | None:
        """Seconds until ``address`` may try again, or None when it may now."""
        failures = self._recent(address)
        if failures is None or len(failures) < self.limit:
            return None
        return max(1, int(failures[0] + self.window - self._clock()) + 1)

    def failed(self, address: str) -> None:
        """Count one wrong token from ``address``."""
        failures = self._recent(address)
        if failures is None:
            while len(self._failures) >= _MAX_ADDRESSES:
                self._failures.popitem(last=False)
            failures = self._failures[address] = deque()
        failures.append(self._clock())
        self._failures.move_to_end(address)

    def _recent(self, address: str) -> deque[float] | None:
        failures = self._failures.get(address)
        if failures is None:
            return None
        horizon = self._clock() - self.window
        while failures and failures[0] <= horizon:
            failures.popleft()
        if not failures:
            del self._failures[address]
            return None
        return failures
