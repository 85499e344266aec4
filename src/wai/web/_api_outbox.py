"""The follow-up outbox: list (state, kind, ``after_id`` pages), counts, retry, discard."""

from __future__ import annotations

from typing import Any

from wai.errors import OutboxRowNotFound
from wai.web._encode import OUTBOX_ENTRY, OUTBOX_STATS
from wai.web._endpoint import Call

__all__ = ["discard_outbox_row", "list_outbox", "outbox_stats", "retry_outbox_row"]


async def list_outbox(call: Call) -> dict[str, Any]:
    """A page of rows, oldest first, and the ``after_id`` of the next page (null: no more)."""
    a = call.args
    limit: int = a["limit"]
    entries = await call.client.outbox_list(
        state=a["state"], kind=a["kind"], after_id=a["after_id"], limit=limit + 1
    )
    page = entries[:limit]
    more = len(entries) > limit
    return {
        "items": [OUTBOX_ENTRY.encode(e) for e in page],
        "next_after_id": page[-1].id if more else None,
    }


async def outbox_stats(call: Call) -> dict[str, Any]:
    """How many rows are pending and how many failed."""
    return OUTBOX_STATS.encode(await call.client.outbox_stats())


async def retry_outbox_row(call: Call) -> dict[str, Any]:
    """Make a row due now with a fresh attempt budget; the row."""
    return OUTBOX_ENTRY.encode(await call.client.outbox_retry(call.args["outbox_id"]))


async def discard_outbox_row(call: Call) -> dict[str, Any]:
    """Delete a row: its follow-ups are never inserted."""
    outbox_id: int = call.args["outbox_id"]
    if not await call.client.outbox_discard(outbox_id):
        raise OutboxRowNotFound(
            f"no outbox row with id {outbox_id}: dispatched, discarded, or never there"
        )
    return {"discarded": 1}
