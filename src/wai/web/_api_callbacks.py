"""Callbacks: the jobs parked on one (soonest timeout first, cursor pages) and the recent
timeouts — over the client's ``list_waiting`` and ``list_callback_timeouts``."""

from __future__ import annotations

from typing import Any

from wai.web._encode import CALLBACK_TIMEOUT, WAITING_JOB
from wai.web._endpoint import Call

__all__ = ["list_callback_timeouts", "list_waiting"]


async def list_waiting(call: Call) -> dict[str, Any]:
    """A page of parked jobs, soonest timeout first, and the ``after`` cursor of the next
    (null: no more)."""
    a = call.args
    limit: int = a["limit"]
    # One job more than the page tells whether another page follows.
    waiting = await call.client.list_waiting(
        queue=a["queue"], kind=a["kind"], after=a["after"], limit=limit + 1
    )
    page = waiting[:limit]
    more = len(waiting) > limit
    return {
        "items": [WAITING_JOB.encode(w) for w in page],
        "next_after": page[-1].cursor if more else None,
    }


async def list_callback_timeouts(call: Call) -> dict[str, Any]:
    """The recent callback timeouts, newest first."""
    a = call.args
    found = await call.client.list_callback_timeouts(
        queue=a["queue"], kind=a["kind"], limit=a["limit"]
    )
    return {"items": [CALLBACK_TIMEOUT.encode(t) for t in found]}
