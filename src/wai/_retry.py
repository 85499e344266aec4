"""Retry decisions: exponential backoff with jitter (pure, no I/O)."""

from __future__ import annotations

import random

__all__ = ["MAX_BACKOFF", "backoff"]

#: Longest delay between two attempts, in seconds (24 hours).
MAX_BACKOFF = 24 * 3600.0


def backoff(attempt: int, *, rand: random.Random | None = None) -> float:
    """Seconds to wait before the attempt after ``attempt`` (1-based).

    ``2 ** attempt`` seconds plus up to 25 % random jitter, capped at
    :data:`MAX_BACKOFF`: 2 s after the first failure, 4 s after the second,
    about 17 minutes after the tenth.
    """
    if attempt < 1:
        attempt = 1
    base = 2.0 ** min(attempt, 20)
    jitter = (rand or random).random() * 0.25 * base
    return min(base + jitter, MAX_BACKOFF)
