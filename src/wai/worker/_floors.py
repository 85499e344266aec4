"""Claim floors: where each priority lane of a queue's available jobs begins.

Every available job holds a number from ``jobs_ready_seq``, taken when it became
available and after its transaction took its id (migration 0014). A queue's claims walk
each lane (priority 1 to 4) in number order from a floor: a number below which no
available job of the lane is, nor can appear. So no claim visits the index entries of the
jobs taken before it, which stay until vacuum removes them; and vacuum removes nothing
while any transaction holds an old snapshot, which made each claim slower than the last.

Floors move in probes (``job_ready_probe``), three statements:

1. ``top``: the highest number handed out;
2. in the same transaction, which then ends: a transaction id ``xid`` of its own, and the
   end of the WAL ``lsn``. Ids are handed out in order, so every transaction that took a
   number up to ``top`` has an id below ``xid``;
3. in a new snapshot: each lane's first available job at or above its floor (``fronts``),
   the snapshot's ``xmin`` (every transaction below it has ended), how far the WAL is
   flushed, and the server's start time.

A probe's ``top`` is **settled** once a snapshot's xmin is above its ``xid`` (no
transaction that may hold a number up to ``top`` can still commit one) and the WAL is
flushed past its ``lsn`` (after a crash, the sequence resumes above ``top``, not below it:
its record is durable). In a snapshot that sees a probe settled, a lane's floor may rise to
its front, or to ``top + 1`` when no available job lies between. A probe is often settled
by the next one; under a transaction that stays open after taking an id (a long write),
not before it ends, and the floors wait, as slow as claims were before, never wrong.

A restart of the server, or another server (a failover: an asynchronous standby may lack
the WAL of numbers read from the old primary), starts the floors again from 0, as does a
new process.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "LANES",
    "NO_FLOORS",
    "PROBE_AFTER_JOBS",
    "PROBE_INTERVAL",
    "Floors",
    "Probe",
    "lsn",
    "raised",
]

#: Priorities 1 to 4, one lane each.
LANES = 4

#: Floors that pass over nothing: every lane walked from its start.
NO_FLOORS: tuple[int, ...] = (0,) * LANES

#: Seconds between two probes of a queue while its claims run: the floors trail the
#: queue's front by about two of these.
PROBE_INTERVAL = 0.1

#: Jobs a process claims from a queue before it probes again: behind fewer, the dead
#: entries a claim walks cost less than a probe (three statements, a transaction id).
PROBE_AFTER_JOBS = 100


def lsn(text: str) -> int:
    """A WAL position ``X/Y`` (hexadecimal halves) as one number."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


@dataclass(frozen=True, slots=True)
class Probe:
    """What a probe read before its snapshot: ``top``, its ``xid`` and ``lsn``."""

    top: int
    xid: int
    lsn: int


def raised(floors: Sequence[int], fronts: Sequence[int | None], bound: int) -> tuple[int, ...]:
    """The floors moved up to each lane's front, but not past ``bound`` (a lane with no
    available job at or above its floor moves to ``bound``), and never down."""
    return tuple(
        max(floor, bound if front is None else min(front, bound))
        for floor, front in zip(floors, fronts, strict=True)
    )


class Floors:
    """One queue's floors in one process."""

    __slots__ = ("claimed", "pending", "probed_at", "server", "settled_top", "values")

    def __init__(self) -> None:
        self.values = NO_FLOORS
        # The latest probe not settled yet, and the top of the latest one settled.
        self.pending: Probe | None = None
        self.settled_top = -1
        self.server: str | None = None
        self.probed_at = -math.inf
        # Jobs claimed since the latest probe (a new process probes first).
        self.claimed = PROBE_AFTER_JOBS

    def due(self, now: float) -> bool:
        """Whether a probe is due at monotonic time ``now``: enough time and enough claimed
        jobs since the latest."""
        return now - self.probed_at >= PROBE_INTERVAL and self.claimed >= PROBE_AFTER_JOBS

    def probing(self, now: float) -> None:
        """A probe starts at monotonic time ``now``."""
        self.probed_at, self.claimed = now, 0

    def settle(
        self,
        probe: Probe,
        fronts: Sequence[int | None],
        *,
        xmin: int,
        flushed: int,
        server: str,
    ) -> None:
        """Take a probe's answer: ``probe`` as it read before its snapshot, the rest as its
        snapshot saw it."""
        if server != self.server:
            self.values, self.pending, self.server = NO_FLOORS, None, server
            self.settled_top = -1

        def settled(p: Probe) -> bool:
            return xmin > p.xid and flushed >= p.lsn

        if settled(probe):
            self.values = raised(self.values, fronts, probe.top + 1)
            self.pending, self.settled_top = None, probe.top
        elif self.pending is not None and settled(self.pending):
            self.values = raised(self.values, fronts, self.pending.top + 1)
            self.pending, self.settled_top = probe, self.pending.top
        elif self.pending is None:
            self.pending = probe
