"""The dead-letter queue: list (filters, cursor pages), show, retry and purge, one or in bulk.

Bulk actions take their filters in a JSON body; the client refuses an empty filter
set unless ``"all": true`` (a 400 that changes nothing).
"""

from __future__ import annotations

from typing import Any

from wai.web._encode import DLQ_ENTRY, JOB
from wai.web._endpoint import Call

__all__ = [
    "bulk_purge_dlq",
    "bulk_retry_dlq",
    "dlq_stats",
    "get_dlq_entry",
    "list_dlq",
    "purge_dlq_entry",
    "retry_dlq_entry",
]


async def list_dlq(call: Call) -> dict[str, Any]:
    """A page of entries, newest first, and the ``before`` cursor of the next (null: no more)."""
    a = call.args
    limit: int = a["limit"]
    entries = await call.client.list_dlq(
        queue=a["queue"],
        kind=a["kind"],
        tag=a["tag"],
        reason=a["reason"],
        before=a["before"],
        limit=limit + 1,
    )
    page = entries[:limit]
    more = len(entries) > limit
    return {
        "items": [DLQ_ENTRY.encode(e) for e in page],
        "next_before": page[-1].cursor if more else None,
    }


async def get_dlq_entry(call: Call) -> dict[str, Any]:
    """One entry."""
    return DLQ_ENTRY.encode(await call.client.get_dlq_entry(call.args["job_id"]))


async def retry_dlq_entry(call: Call) -> dict[str, Any]:
    """Put one dead-lettered job back to run; its row."""
    a = call.args
    row = await call.client.retry_from_dlq(
        a["job_id"], queue=a["queue"], priority=a["priority"], run_at=a["run_at"]
    )
    return JOB.encode(row)


async def bulk_retry_dlq(call: Call) -> dict[str, Any]:
    """Retry every entry matching the filters (or all); how many."""
    a = call.args
    retried = await call.client.bulk_retry_from_dlq(
        queue=a["queue"],
        kind=a["kind"],
        tag=a["tag"],
        reason=a["reason"],
        all=a["all"],
        to_queue=a["to_queue"],
        priority=a["priority"],
        run_at=a["run_at"],
    )
    return {"retried": retried}


async def purge_dlq_entry(call: Call) -> dict[str, Any]:
    """Delete one entry for good."""
    await call.client.purge_dlq_entry(call.args["job_id"])
    return {"purged": 1}


async def bulk_purge_dlq(call: Call) -> dict[str, Any]:
    """Delete every entry matching the filters (or all); how many."""
    a = call.args
    purged = await call.client.purge_dlq(
        queue=a["queue"], kind=a["kind"], tag=a["tag"], reason=a["reason"], all=a["all"]
    )
    return {"purged": purged}


async def dlq_stats(call: Call) -> dict[str, Any]:
    """How many jobs are dead-lettered: in all, and per queue that has any."""
    depths = await call.client.dlq_depths()
    return {"total": sum(depths.values()), "queues": depths}
