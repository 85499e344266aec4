"""How long a loop that notifications can wake waits between its passes while idle.

A claim loop, the promoter and the cron pass all ran at a fixed pace: a queue polled
every second, promotion every half second, cron every second, whether or not anything
happened, so a fleet of idle workers kept the database busy. While the process's LISTEN
connection delivers notifications (a probe proved it), whatever makes such a loop's work
due sooner also sends a note that wakes it: an available job wakes its queue, a job that
becomes scheduled or retryable and a changed cron schedule send a note on the
``<schema>.due`` channel (a trigger, migration 0013), an outbox row written or made due
sooner one on ``<schema>.outbox`` (migration 0015) for the follow-up sweeper. Such a
loop may then wait longer after each pass that found nothing: its interval, doubling, at
most the idle cap, and never past the moment it knows it is next due. Without LISTEN
every loop keeps its interval, as before.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["IdlePace", "Wakeups", "next_wait", "wait_woken"]


def next_wait(
    interval: float,
    *,
    cap: float,
    idle: int,
    listening: bool,
    due_in: float | None = None,
) -> float:
    """Seconds until a loop's next pass.

    ``idle`` counts the passes in a row that found nothing to do; ``due_in`` is how soon
    the loop knows it has work (None: it knows of none). Without ``listening`` the loop
    keeps ``interval``, since nothing could wake it sooner. While listening it waits
    ``interval`` doubled per idle pass, at most ``cap``, at most until ``due_in``, and
    never less than ``interval`` (passes stay that far apart however busy the table).
    """
    if not listening:
        return interval
    wait = min(cap, interval * 2 ** min(idle, 32))
    if due_in is not None:
        wait = min(wait, due_in)
    return max(wait, interval)


async def wait_woken(event: asyncio.Event | None, seconds: float, *, floor: float = 0.0) -> None:
    """Sleep ``seconds``, or less once ``event`` is set, but at least ``floor``.

    A cancellation always propagates, even one that arrives as the event is set (not
    ``asyncio.wait_for``, which on Python 3.11 can swallow it then).
    """
    if floor > 0:
        await asyncio.sleep(min(floor, seconds))
    rest = seconds - floor
    if rest <= 0:
        return
    if event is None:
        await asyncio.sleep(rest)
        return
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=rest)
    finally:
        waiter.cancel()


class Wakeups:
    """One notification fanned out to the loops that wait for it, each with its own event
    (a loop clears its own before a pass; one loop's clear must not hide a note from
    another). Events of loops that ended are dropped with them."""

    def __init__(self) -> None:
        self._events: weakref.WeakSet[asyncio.Event] = weakref.WeakSet()

    def event(self) -> asyncio.Event:
        """A new event, set by every later :meth:`set`."""
        event = asyncio.Event()
        self._events.add(event)
        return event

    def set(self) -> None:
        """Wake every loop."""
        for event in list(self._events):
            event.set()


@dataclass(frozen=True, slots=True)
class IdlePace:
    """What lets a periodic loop back off: the cap on its wait, whether notifications
    reach the process now, and the wakeups that cut a wait short."""

    cap: float
    listening: Callable[[], bool]
    wakeups: Wakeups
