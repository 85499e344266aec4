"""What a handler may return to steer its job's next state."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from wai.errors import ValidationError

__all__ = ["CallbackToken", "Cancel", "HandlerResult", "RetryAfter", "Snooze", "WaitForCallback"]


def _check_seconds(name: str, seconds: float) -> None:
    if not isinstance(seconds, int | float) or seconds < 0 or seconds != seconds:
        raise ValidationError(f"{name}(seconds) needs a number >= 0, got {seconds!r}")


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """Retry the job after ``seconds``; the attempt counts against ``max_attempts``."""

    seconds: float

    def __post_init__(self) -> None:
        _check_seconds("RetryAfter", self.seconds)


@dataclass(frozen=True, slots=True)
class Snooze:
    """Run the job again after ``seconds`` without consuming an attempt. No event fires."""

    seconds: float

    def __post_init__(self) -> None:
        _check_seconds("Snooze", self.seconds)


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel the job for good, recording ``reason``."""

    reason: str = "cancelled by handler"


@dataclass(frozen=True, slots=True)
class CallbackToken:
    """A registered external callback, from ``job.register_callback()``.

    ``id`` is the callback id to hand to the external system, which sends it back
    with its answer (``complete_external(id, ...)``, ``resume_external(id, ...)``…).
    ``job_id`` and ``run_lease`` name the attempt that registered it.
    """

    id: UUID
    job_id: int
    run_lease: int


@dataclass(frozen=True, slots=True)
class WaitForCallback:
    """Park the job in ``waiting_external`` until the callback ``token`` is resolved.

    The attempt ends and frees its slot; heartbeat and deadline are cleared and
    only the callback timeout guards the job. ``token`` must come from
    ``job.register_callback()`` in the same attempt.
    """

    token: CallbackToken


HandlerResult = None | RetryAfter | Snooze | Cancel | WaitForCallback
