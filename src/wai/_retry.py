"""Retry delays: exponential backoff with jitter (pure, no I/O).

The one definition of how long wai waits before trying again: a job's next attempt after
a failure or a rescue (:func:`backoff`), and the next dispatch of an outbox row whose
follow-ups failed (:func:`outbox_backoff`). The SQL takes these delays as parameters.
"""

from __future__ import annotations

import random

__all__ = ["MAX_BACKOFF", "OUTBOX_MAX_BACKOFF", "backoff", "outbox_backoff"]

#: Longest delay between two attempts of a job, in seconds (24 hours).
MAX_BACKOFF = 24 * 3600.0

#: Longest delay between two dispatches of an outbox row, in seconds (one hour): its
#: follow-ups are owed already, so a fixed cause (a deploy, a spec fixed) is picked up soon.
OUTBOX_MAX_BACKOFF = 3600.0


def backoff(
    attempt: int,
    *,
    cap: float = MAX_BACKOFF,
    jitter: float = 0.25,
    rand: random.Random | None = None,
) -> float:
    """Seconds to wait before the attempt after ``attempt`` (1-based).

    ``2 ** attempt`` seconds plus up to ``jitter`` (25 %) of it at random, capped at
    ``cap`` (:data:`MAX_BACKOFF`): 2 s after the first failure, 4 s after the second,
    about 17 minutes after the tenth. The jitter spreads the retries of jobs that failed
    together (an outage) so they do not return together.
    """
    if attempt < 1:
        attempt = 1
    base = 2.0 ** min(attempt, 20)  # 2**20 s is past any cap: no float grows without bound
    spread = (rand or random).random() * jitter * base if jitter else 0.0
    return min(base + spread, cap)


def outbox_backoff(attempt: int) -> float:
    """Seconds before an outbox row whose ``attempt``-th dispatch failed is tried again.

    ``2 ** attempt`` seconds, capped at :data:`OUTBOX_MAX_BACKOFF`, without jitter: one
    sweeper takes the rows in order, so there is no herd to spread.
    """
    return backoff(attempt, cap=OUTBOX_MAX_BACKOFF, jitter=0.0)
