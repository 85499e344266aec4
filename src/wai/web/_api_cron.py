"""Periodic schedules: list (with next fire times), show, pause, resume, trigger, delete."""

from __future__ import annotations

from typing import Any

from wai.web._encode import JOB, SCHEDULE
from wai.web._endpoint import Call

__all__ = [
    "delete_cron",
    "get_cron",
    "list_cron",
    "pause_cron",
    "resume_cron",
    "trigger_cron",
]


async def list_cron(call: Call) -> dict[str, Any]:
    """Every stored schedule, by name."""
    return {"items": [SCHEDULE.encode(s) for s in await call.client.list_cron()]}


async def get_cron(call: Call) -> dict[str, Any]:
    """One schedule."""
    return SCHEDULE.encode(await call.client.get_cron(call.args["name"]))


async def pause_cron(call: Call) -> dict[str, Any]:
    """Stop a schedule firing; the schedule."""
    return SCHEDULE.encode(await call.client.pause_cron(call.args["name"]))


async def resume_cron(call: Call) -> dict[str, Any]:
    """Let a paused schedule fire again; the schedule."""
    return SCHEDULE.encode(await call.client.resume_cron(call.args["name"]))


async def trigger_cron(call: Call) -> dict[str, Any]:
    """Enqueue one job of the schedule now; the job."""
    return JOB.encode(await call.client.trigger_cron(call.args["name"]))


async def delete_cron(call: Call) -> dict[str, Any]:
    """Delete a stored schedule."""
    name: str = call.args["name"]
    await call.client.delete_cron(name)
    return {"name": name, "deleted": True}
