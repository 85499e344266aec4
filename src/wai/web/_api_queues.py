"""Queues: statistics, pause, resume, drain, flow control — over the client's queue methods."""

from __future__ import annotations

from typing import Any

from wai._flow import RateLimit
from wai.web._encode import QUEUE_DEPTH, QUEUE_STATS, RATE_LIMIT, THROUGHPUT_MINUTE
from wai.web._endpoint import Call

__all__ = [
    "depth_history",
    "drain_queue",
    "list_queues",
    "pause_queue",
    "resume_queue",
    "set_kind_rate_limit",
    "set_queue_limits",
    "throughput",
]


async def list_queues(call: Call) -> dict[str, Any]:
    """Every queue that has jobs or was paused, by name, with its counts by state and lag."""
    return {"items": [QUEUE_STATS.encode(q) for q in await call.client.queue_stats()]}


async def depth_history(call: Call) -> dict[str, Any]:
    """The depth samples of the last minutes, oldest first."""
    samples = await call.client.queue_depth_history(
        minutes=call.args["minutes"], queue=call.args["queue"]
    )
    return {"items": [QUEUE_DEPTH.encode(d) for d in samples]}


async def throughput(call: Call) -> dict[str, Any]:
    """Counts by event for every minute of the window, oldest first."""
    a = call.args
    minutes = await call.client.throughput(minutes=a["minutes"], queue=a["queue"], kind=a["kind"])
    return {"items": [THROUGHPUT_MINUTE.encode(m) for m in minutes]}


async def pause_queue(call: Call) -> dict[str, Any]:
    """Stop workers claiming from the queue."""
    name: str = call.args["name"]
    await call.client.pause_queue(name)
    return {"queue": name, "paused": True}


async def resume_queue(call: Call) -> dict[str, Any]:
    """Let workers claim from the queue again."""
    name: str = call.args["name"]
    await call.client.resume_queue(name)
    return {"queue": name, "paused": False}


async def drain_queue(call: Call) -> dict[str, Any]:
    """Cancel every job of the queue that waits to run; how many."""
    name: str = call.args["name"]
    return {"queue": name, "cancelled": await call.client.drain_queue(name)}


async def set_queue_limits(call: Call) -> dict[str, Any]:
    """Replace the queue's rate limit and global concurrency (null lifts one); the limits as
    stored, the burst resolved."""
    name: str = call.args["name"]
    rate: RateLimit | None = call.args["rate_limit"]
    concurrency: int | None = call.args["global_concurrency"]
    await call.client.set_queue_limits(name, rate_limit=rate, global_concurrency=concurrency)
    stored = None if rate is None else RateLimit(rate.limit, per=rate.per, burst=rate.capacity)
    return {
        "queue": name,
        "rate_limit": None if stored is None else RATE_LIMIT.encode(stored),
        "global_concurrency": concurrency,
    }


async def set_kind_rate_limit(call: Call) -> dict[str, Any]:
    """Set or lift (null) the rate limit of one kind within the queue; the limit as stored,
    the burst resolved."""
    name: str = call.args["name"]
    kind: str = call.args["kind"]
    rate: RateLimit | None = call.args["rate_limit"]
    await call.client.set_kind_rate_limit(name, kind, rate)
    stored = None if rate is None else RateLimit(rate.limit, per=rate.per, burst=rate.capacity)
    return {
        "queue": name,
        "kind": kind,
        "rate_limit": None if stored is None else RATE_LIMIT.encode(stored),
    }
