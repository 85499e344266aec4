"""The job args of the wai adapter, shared by its producer and its worker."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Chained", "Done", "Noop", "Ping"]


@dataclass(frozen=True, slots=True)
class Noop:
    """A no-op job: args ``{"seq": i}`` (kind ``noop``)."""

    seq: int


@dataclass(frozen=True, slots=True)
class Done:
    """The follow-up of a ``Noop`` in the follow-up drain: ``{"seq": i}`` (kind ``done``)."""

    seq: int


@dataclass(frozen=True, slots=True)
class Ping:
    """A no-op job that carries its insert time: ``{"seq": i, "t": time.time()}`` (kind ``ping``).

    Used only by the latency workload, so the throughput workloads keep the
    exact ``{"seq": i}`` args of the peer measurements.
    """

    seq: int
    t: float


@dataclass(frozen=True, slots=True)
class Chained:
    """A ``Ping`` whose completion enqueues one ``Done`` follow-up (kind ``chained``).

    Used by ``sustained.py`` for a fifth of its jobs.
    """

    seq: int
    t: float
