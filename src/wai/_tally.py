"""Counts of job outcomes per minute, kept in memory until they are written (no I/O here)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

__all__ = ["EVENTS", "OUTCOME_EVENTS", "Key", "Tally", "minute_of"]

#: The events counted, in the order the API and the UI show them.
EVENTS = ("completed", "retried", "failed", "cancelled", "snoozed", "parked", "rescued")

#: The counted event of each outcome event (``wai._outcomes.Outcome.event``).
OUTCOME_EVENTS: Mapping[str, str] = {
    "completed": "completed",
    "retried": "retried",
    "exhausted": "failed",
    "cancelled": "cancelled",
    "snoozed": "snoozed",
    "waiting_for_callback": "parked",
}

#: (minute, queue, kind, event)
Key = tuple[datetime, str, str, str]


def minute_of(at: datetime) -> datetime:
    """``at`` truncated to its minute, in UTC."""
    return at.astimezone(UTC).replace(second=0, microsecond=0)


class Tally:
    """Counts by (minute, queue, kind, event), taken out in one piece to be written.

    ``add`` is a dict increment, cheap enough for every committed batch. ``take``
    hands the counts over and starts afresh; a write that failed gives them back with
    ``restore``. At most ``max_keys`` keys are held: when writes keep failing, the
    oldest minutes are dropped first (``dropped`` counts what was lost), and minutes
    older than ``keep`` are never restored, so memory stays bounded.
    """

    def __init__(self, *, max_keys: int = 50_000, keep: timedelta = timedelta(hours=24)) -> None:
        self._counts: dict[Key, int] = {}
        self._max_keys = max_keys
        self._keep = keep
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._counts)

    def add(
        self, queue: str, kind: str, event: str, n: int = 1, *, minute: datetime | None = None
    ) -> None:
        """Count ``n`` ``event`` of ``kind`` in ``queue`` in ``minute`` (default: this one).

        ``minute`` must come from :func:`minute_of`; a caller counting many rows at once
        computes it once.
        """
        key = (minute or minute_of(datetime.now(UTC)), queue, kind, event)
        counts = self._counts
        if key in counts:
            counts[key] += n
            return
        counts[key] = n
        if len(counts) > self._max_keys:
            self._trim()

    def take(self) -> dict[Key, int]:
        """The counts so far, sorted by key; the tally starts empty again."""
        counts, self._counts = self._counts, {}
        return dict(sorted(counts.items()))

    def restore(self, counts: Mapping[Key, int], *, now: datetime | None = None) -> None:
        """Give back counts that could not be written, to be written with the next ones."""
        oldest = minute_of(now or datetime.now(UTC)) - self._keep
        for key, n in counts.items():
            if key[0] < oldest:
                self.dropped += n
                continue
            self._counts[key] = self._counts.get(key, 0) + n
        if len(self._counts) > self._max_keys:
            self._trim()

    def _trim(self) -> None:
        ordered = sorted(self._counts)
        for key in ordered[: len(ordered) - self._max_keys]:
            self.dropped += self._counts.pop(key)
