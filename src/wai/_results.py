"""What a handler may return to steer its job's next state."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from wai._seconds import check_seconds
from wai._storable import check_text

__all__ = ["CallbackToken", "Cancel", "HandlerResult", "RetryAfter", "Snooze", "WaitForCallback"]


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """Retry the job after ``seconds``; the attempt counts against ``max_attempts``.

    ``seconds`` is a finite number from 0 to 100 years (:data:`wai._seconds.MAX_SECONDS`);
    anything else (negative, NaN, infinite, a bool) raises :class:`wai.ValidationError`.
    """

    seconds: float

    def __post_init__(self) -> None:
        check_seconds(self.seconds, "RetryAfter(seconds)", allow_zero=True)


@dataclass(frozen=True, slots=True)
class Snooze:
    """Run the job again after ``seconds`` without consuming an attempt. No event fires.

    ``seconds`` is a finite number from 0 to 100 years, as for :class:`RetryAfter`.
    """

    seconds: float

    def __post_init__(self) -> None:
        check_seconds(self.seconds, "Snooze(seconds)", allow_zero=True)


@dataclass(frozen=True, slots=True)
class Cancel:
    """Cancel the job for good, recording ``reason``.

    ``reason`` must be a string PostgreSQL can store: a NUL byte or a lone surrogate
    raises :class:`wai.ValidationError` here, where the ``Cancel`` is built.
    """

    reason: str = "cancelled by handler"

    def __post_init__(self) -> None:
        check_text(self.reason, "Cancel(reason)")


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
