"""Flow control's values and decisions (pure, no I/O): rate limits and a limited claim's wait."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from wai._kinds import validate_kind
from wai._seconds import check_seconds
from wai.errors import ValidationError

__all__ = [
    "MAX_LIMIT",
    "FlowState",
    "RateLimit",
    "check_global_concurrency",
    "check_kind_rate_limits",
    "claim_wait",
    "stored_rate_limit",
]

MAX_LIMIT = 1_000_000


def _count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ValidationError(f"{name} must be an integer 1..{MAX_LIMIT}, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most *limit* claims every *per* seconds, for every process together.

    A token bucket kept in the database: it refills continuously at ``limit / per``
    tokens a second and holds at most *burst* tokens; each claimed job takes one. Over
    any window of *per* seconds a queue therefore starts at most ``limit + burst``
    attempts, and at most *burst* at once after a quiet spell. *burst* defaults to a
    tenth of *limit* (at least 1), which lets a limited queue still claim a few jobs per
    statement. ``RateLimit(50, per=1.0, burst=10)``: 50 a second, 10 at once.
    """

    limit: int
    per: float = 1.0
    burst: int | None = None

    def __post_init__(self) -> None:
        _count(self.limit, "rate limit")
        check_seconds(self.per, "per")
        if not 0.001 <= self.per <= 86_400:
            raise ValidationError(f"per must be 0.001..86400 seconds, got {self.per!r}")
        if self.burst is not None:
            _count(self.burst, "burst")

    @property
    def capacity(self) -> int:
        """The most tokens the bucket holds: *burst*, or a tenth of *limit* (at least 1)."""
        return self.burst if self.burst is not None else max(1, self.limit // 10)

    @property
    def rate(self) -> float:
        """Tokens a second."""
        return self.limit / self.per

    def __str__(self) -> str:
        return f"{self.limit}/{self.per:g}s burst {self.capacity}"


def check_kind_rate_limits(limits: object) -> None:
    """Raise unless ``limits`` maps kind names to :class:`RateLimit` values."""
    if not isinstance(limits, Mapping):
        raise ValidationError(
            f'kind_rate_limits must map kinds to wai.RateLimit, e.g. {{"charge": '
            f"RateLimit(10)}}, got {limits!r}"
        )
    for kind, limit in cast(Mapping[object, object], limits).items():
        validate_kind(cast(str, kind))  # raises on a non-str too
        if not isinstance(limit, RateLimit):
            raise ValidationError(
                f"the rate limit of kind {kind!r} must be a wai.RateLimit, got {limit!r}"
            )


def check_global_concurrency(value: object) -> int:
    """``value`` if it is a valid global concurrency (1..1,000,000), else raise."""
    return _count(value, "global_concurrency")


@dataclass(frozen=True, slots=True)
class FlowState:
    """A limited queue right after a claim, as its transaction left it.

    *tokens* is the bucket's content (None without a rate limit) and *running* the
    attempts running in the queue (None without a global concurrency).
    """

    rate_limit: RateLimit | None
    global_concurrency: int | None
    tokens: float | None
    running: int | None
    at: datetime | None = None
    #: Seconds until the first kind whose bucket is empty holds a whole token again.
    kind_wait: float | None = None


# A claim capped by the global concurrency looks again this often when no attempt of this
# process ends first (an attempt of another process ending sends no wakeup).
GLOBAL_CONCURRENCY_POLL = 0.1


def claim_wait(state: FlowState | None, *, wanted: int, claimed: int) -> float | None:
    """How long a limited queue's claim loop waits before claiming again, in seconds.

    None: flow control did not cap this claim (the queue had fewer jobs, or the claim
    was full): wait as an unlimited queue would. A rate-limited claim waits until the
    queue's bucket holds a whole token again, or the first emptied bucket of one of its
    kinds does; one capped by the global concurrency polls.
    """
    if state is None or claimed >= wanted:
        return None
    rate = state.rate_limit
    if rate is not None and state.tokens is not None and state.tokens < 1:
        # Nothing of the queue starts before its bucket refills.
        return max(0.001, (1 - state.tokens) / rate.rate)
    waits: list[float] = []
    if state.kind_wait is not None:
        waits.append(max(0.001, state.kind_wait))
    gc = state.global_concurrency
    if gc is not None and state.running is not None and state.running >= gc:
        waits.append(GLOBAL_CONCURRENCY_POLL)
    return min(waits) if waits else None


def stored_rate_limit(limit: object, per: object, burst: object) -> RateLimit | None:
    """The rate limit of a queues row (its three columns), None when it has none."""
    if limit is None or per is None or burst is None:
        return None
    return RateLimit(
        int(cast(int, limit)), per=float(cast(float, per)), burst=int(cast(int, burst))
    )
