"""Jobs: list (filters, keyset pages), show, cancel, retry — over the client's admin methods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from wai._job import JobRow
from wai.web._encode import JOB, LINEAGE
from wai.web._endpoint import Call

__all__ = [
    "SCAN_WINDOW",
    "cancel_job",
    "get_job",
    "job_lineage",
    "list_jobs",
    "retry_job",
    "scans",
]


#: The most ids one page of a scanning listing looks through (see :func:`scans`): some
#: 25 ms of reading and matching jobs on a 2-core server (bench/job_list.py), with room
#: left for a loaded one under 100 ms.
SCAN_WINDOW: Final = 50_000

#: The states whose jobs an index lists in id order (jobs_state_idx).
_INDEXED_STATES: Final = frozenset(
    {"scheduled", "retryable", "waiting_external", "failed", "cancelled"}
)


def scans(args: Mapping[str, Any]) -> bool:
    """Whether a listing with these filters reads job after job to find its matches.

    True when a filter no index serves is given (``search``, ``kind``, ``queue``,
    ``tag``) and none that an index serves (a state of :data:`_INDEXED_STATES`,
    ``trigger_job_id``): such a listing may read every job to fill a page.
    """
    checked = any(args[name] is not None for name in ("search", "kind", "queue", "tag"))
    indexed = args["state"] in _INDEXED_STATES or args["trigger_job_id"] is not None
    return checked and not indexed


async def list_jobs(call: Call) -> dict[str, Any]:
    """A page of jobs, newest first, and the ``before_id`` of the next page (null: no more).

    A listing that :func:`scans` looks through at most :data:`SCAN_WINDOW` ids per
    page, from ``before_id`` (or the newest job in the time range) down: its page may
    hold fewer jobs than ``limit``, or none, while ``next_before_id`` says where the
    next look starts (just above the next job in range, skipping empty ids).
    """
    a = call.args
    client = call.client
    limit: int = a["limit"]
    span = {"created_after": a["created_after"], "created_before": a["created_before"]}
    filters: dict[str, Any] = {
        "state": a["state"],
        "kind": a["kind"],
        "queue": a["queue"],
        "tag": a["tag"],
        "trigger_job_id": a["trigger_job_id"],
        "search": a["search"],
        **span,
    }
    before_id: int | None = a["before_id"]
    if not scans(a):
        # One row more than the page tells whether another page follows, without an
        # empty last one.
        rows = await client.list_jobs(**filters, before_id=before_id, limit=limit + 1)
        page = rows[:limit]
        more = len(rows) > limit
        return _page(page, page[-1].id if more else None)
    if before_id is None:
        newest = await client.list_jobs(**span, limit=1)
        if not newest:
            return _page([], None)
        before_id = newest[0].id + 1
    floor = max(before_id - SCAN_WINDOW - 1, 0)
    rows = await client.list_jobs(**filters, before_id=before_id, after_id=floor, limit=limit + 1)
    if len(rows) > limit:
        page = rows[:limit]
        return _page(page, page[-1].id)
    # the window is read to its end: the next look starts at the next job in range below it
    below = await client.list_jobs(**span, before_id=floor + 1, limit=1)
    return _page(rows, below[0].id + 1 if below else None)


def _page(rows: list[JobRow], next_before_id: int | None) -> dict[str, Any]:
    return {"items": [JOB.encode(r) for r in rows], "next_before_id": next_before_id}


async def get_job(call: Call) -> dict[str, Any]:
    """One job."""
    return JOB.encode(await call.client.get_job(call.args["job_id"]))


async def job_lineage(call: Call) -> dict[str, Any]:
    """A job with its trigger chain up, its follow-ups down and the follow-ups still owed."""
    return LINEAGE.encode(await call.client.lineage(call.args["job_id"], limit=call.args["limit"]))


async def cancel_job(call: Call) -> dict[str, Any]:
    """Cancel a job that has not finished; its ``cancelled`` row."""
    return JOB.encode(await call.client.cancel(call.args["job_id"]))


async def retry_job(call: Call) -> dict[str, Any]:
    """Run a failed, cancelled or waiting job again now; its ``available`` row."""
    return JOB.encode(await call.client.retry(call.args["job_id"]))
