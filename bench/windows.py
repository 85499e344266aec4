"""Per-window counters of a child process in ``sustained.py`` (standard library only).

Every child of a sustained run gets the run's epoch (a ``time.time()`` value) and the
window length; window ``k`` is ``[epoch + k * seconds, epoch + (k + 1) * seconds)`` on the
machine's wall clock, the same clock for every process of the run. A child counts what
happens in each window and, once a window has ended, writes one protocol line for it::

    {"window": k, "counts": {"handled": n, ...}, "samples": {"pickup_ms": [p50, p99, max, n]}}

The orchestrator merges these lines by ``k`` with its own samples of the server. Samples are
kept as a histogram of 0.05-ms buckets (:class:`Histogram`: quantiles within 0.025 ms, the
maximum exact), so that ending a window costs the child well under a millisecond: sorting
the tens of thousands of values a window of a busy worker holds stopped its event loop for
over 10 ms, once a window, and that stall showed in the very lag and pickup figures it
reports.

While :meth:`Windows.run` runs, it also watches the child's own process: how late a 5-ms
sleep of its event loop wakes (the largest lag, ``loop_lag_ms``, and the wakes 20 ms or
more late, ``loop_stalls``), and how long each full garbage collection holds it
(``gc_full`` collections of the oldest generation, the longest ``gc_full_ms``): a pickup's
tail that the server does not explain may be the child's own.
"""

from __future__ import annotations

import asyncio
import gc
import math
import time
from collections import defaultdict

from protocol import emit

__all__ = ["Windows"]

#: How often the loop watcher sleeps (s), and the lag counted as a stall (ms).
LAG_EVERY = 0.005
STALL_MS = 20.0


#: Buckets per unit of a sampled value: values in milliseconds fall in 0.05-ms buckets.
_PER_UNIT = 20.0


class Histogram:
    """Values in buckets of 1/:data:`_PER_UNIT`: their count, maximum and quantiles.

    Adding a value costs a multiplication and a dictionary update (a logarithmic bucket
    took three times as long, for precision the figures do not show); values below zero
    (a clock read a hair early) count in the first bucket.
    """

    __slots__ = ("buckets", "maximum", "n")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.n = 0
        self.maximum = -math.inf

    def add(self, value: float) -> None:
        """Count ``value``."""
        key = int(value * _PER_UNIT)
        self.buckets[key] = self.buckets.get(key, 0) + 1
        self.n += 1
        if value > self.maximum:
            self.maximum = value

    def quantile(self, p: float) -> float:
        """The ``p``-th percentile (0-100): the middle of the bucket of the value of rank
        ``p / 100 * (n - 1)`` (nearest rank), never above the maximum."""
        rank = round(p / 100.0 * (self.n - 1))
        seen = 0
        for key in sorted(self.buckets):
            seen += self.buckets[key]
            if rank < seen:
                return min((key + 0.5) / _PER_UNIT, self.maximum)
        return self.maximum


class Windows:
    """Counts and samples per window; :meth:`run` emits each window once it has ended."""

    def __init__(self, epoch: float, seconds: float) -> None:
        self.epoch = epoch
        self.seconds = seconds
        self._counts: defaultdict[int, defaultdict[str, int]] = defaultdict(
            lambda: defaultdict(int)
        )
        self._samples: defaultdict[int, defaultdict[str, Histogram]] = defaultdict(
            lambda: defaultdict(Histogram)
        )
        self._maxima: defaultdict[int, dict[str, float]] = defaultdict(dict)
        self._gc_at = 0.0

    def index(self, now: float | None = None) -> int:
        """The window that wall-clock time ``now`` (default: now) falls in."""
        return math.floor(((time.time() if now is None else now) - self.epoch) / self.seconds)

    def count(self, name: str, n: int = 1) -> None:
        """Add ``n`` to counter ``name`` of the current window."""
        self._counts[self.index()][name] += n

    def sample(self, name: str, value: float) -> None:
        """Record one value of ``name`` (summarised as p50, p99, max and count)."""
        self._samples[self.index()][name].add(value)

    def peak(self, name: str, value: float) -> None:
        """Keep the largest ``value`` of ``name`` seen in the current window."""
        k = self.index()
        self._maxima[k][name] = max(value, self._maxima[k].get(name, value))

    def flush(self, upto: int) -> None:
        """Emit every window below ``upto`` (in order) and forget it."""
        for k in sorted({*self._counts, *self._samples, *self._maxima}):
            if k >= upto:
                break
            samples = {
                name: [h.quantile(50), h.quantile(99), h.maximum, h.n]
                for name, h in self._samples.pop(k, {}).items()
            }
            emit(
                {
                    "window": k,
                    "counts": dict(self._counts.pop(k, {})),
                    "samples": samples,
                    "maxima": self._maxima.pop(k, {}),
                }
            )

    async def run(self) -> None:
        """Emit each window a little after it ends, until cancelled; meanwhile watch the
        event loop's lag and the full garbage collections."""
        gc.callbacks.append(self._on_gc)
        watcher = asyncio.ensure_future(self._watch_loop())
        try:
            while True:
                k = self.index()
                end = self.epoch + (k + 1) * self.seconds + 0.05
                await asyncio.sleep(max(0.0, end - time.time()))
                self.flush(self.index())
        finally:
            watcher.cancel()
            gc.callbacks.remove(self._on_gc)

    async def _watch_loop(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(LAG_EVERY)
            lag = 1000 * (time.perf_counter() - t - LAG_EVERY)
            self.peak("loop_lag_ms", lag)
            if lag >= STALL_MS:
                self.count("loop_stalls")

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._gc_at = time.perf_counter()
        else:
            self.peak("gc_full_ms", 1000 * (time.perf_counter() - self._gc_at))
            self.count("gc_full")
