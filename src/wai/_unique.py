"""Unique jobs: options and the dedupe key (pure, no I/O)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from math import inf
from typing import Any, Literal

from wai._job import JobState
from wai.errors import ValidationError

__all__ = ["DEFAULT_UNIQUE_STATES", "UniqueOpts", "unique_key"]

#: States in which a unique job holds its key by default. A completed job keeps
#: its key until retention deletes it; failed and cancelled jobs release it.
DEFAULT_UNIQUE_STATES: tuple[JobState, ...] = (
    JobState.SCHEDULED,
    JobState.AVAILABLE,
    JobState.RUNNING,
    JobState.RETRYABLE,
    JobState.WAITING_EXTERNAL,
    JobState.COMPLETED,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class UniqueOpts:
    """Make an insert unique: at most one job per key in ``states``.

    The key is always the kind, plus the args (``by_args``), the queue
    (``by_queue``) and the time bucket of ``by_period`` seconds. A duplicate
    raises :class:`wai.UniqueConflict`, or returns the existing job when
    ``on_conflict="skip"``.
    """

    by_args: bool = True
    by_queue: bool = False
    by_period: float | None = None
    states: Iterable[JobState | str] = field(default=DEFAULT_UNIQUE_STATES)
    on_conflict: Literal["raise", "skip"] = "raise"

    def state_list(self) -> list[str]:
        """The states as plain strings, validated."""
        try:
            out = [JobState(s).value for s in self.states]
        except ValueError as exc:
            raise ValidationError(f"UniqueOpts.states: {exc}") from exc
        if not out:
            raise ValidationError("UniqueOpts.states must name at least one state")
        return out


def unique_key(opts: UniqueOpts, *, kind: str, queue: str, args_json: str, now: datetime) -> bytes:
    """The 16-byte dedupe key of a job inserted with ``opts``."""
    if opts.on_conflict not in ("raise", "skip"):
        raise ValidationError(f"on_conflict must be 'raise' or 'skip', got {opts.on_conflict!r}")
    parts: list[bytes] = [kind.encode()]
    if opts.by_queue:
        parts.append(b"q:" + queue.encode())
    if opts.by_args:
        # Canonical JSON: equal args make one key whatever their key order or spacing.
        canonical: Any = json.loads(args_json)
        parts.append(b"a:" + json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode())
    if opts.by_period is not None:
        period: object = opts.by_period
        # Also refuses NaN, infinity, bools and strings, which would crash or never roll over.
        if isinstance(period, bool) or not isinstance(period, int | float) or not 0 < period < inf:
            raise ValidationError(
                f"UniqueOpts.by_period must be a finite number of seconds > 0, got {period!r}"
            )
        bucket = int(now.timestamp() // opts.by_period)
        parts.append(b"p:" + str(bucket).encode())
    # Tagged parts joined by NUL (no kind holds one): two different option sets never
    # hash the same bytes.
    return hashlib.blake2b(b"\x00".join(parts), digest_size=16).digest()
