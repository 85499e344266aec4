"""Jobs: list (filters, keyset pages), show, cancel, retry — over the client's admin methods."""

from __future__ import annotations

from typing import Any

from wai.web._encode import JOB, LINEAGE
from wai.web._endpoint import Call

__all__ = ["cancel_job", "get_job", "job_lineage", "list_jobs", "retry_job"]


async def list_jobs(call: Call) -> dict[str, Any]:
    """A page of jobs, newest first, and the ``before_id`` of the next page (null: no more)."""
    a = call.args
    limit: int = a["limit"]
    # One row more than the page tells whether another page follows, without an empty last one.
    rows = await call.client.list_jobs(
        state=a["state"],
        kind=a["kind"],
        queue=a["queue"],
        tag=a["tag"],
        trigger_job_id=a["trigger_job_id"],
        before_id=a["before_id"],
        limit=limit + 1,
    )
    page = rows[:limit]
    more = len(rows) > limit
    return {"items": [JOB.encode(r) for r in page], "next_before_id": page[-1].id if more else None}


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
