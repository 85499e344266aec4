"""Registration of tasks, hooks and follow-up specs, as a call or as a decorator.

The callable types here are what the client's registration methods accept: an
args type ``type[T]`` binds ``T`` for that call, so a handler takes ``Job[T]`` and a
follow-up closure takes ``T`` as its first argument; a kind given as a string
leaves the args untyped (``Any``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from wai._followups import RescueReason
from wai._job import JobRow
from wai._registry import Registry

if TYPE_CHECKING:
    from wai._context import Job

__all__ = [
    "CancelledFn",
    "CompletedFn",
    "ExhaustedFn",
    "KindOrType",
    "RescuedFn",
    "RetriedFn",
    "TaskDecorator",
    "register_hook",
    "register_spec",
]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
R = TypeVar("R")

#: What ``on_event`` takes as the kind.
KindOrType = type[Any] | str

#: A closure of ``on_completed_enqueue`` / ``on_waiting_for_callback_enqueue``: ``(args, job)``.
CompletedFn = Callable[[T, JobRow], object]
#: A closure of ``on_retried_enqueue``: ``(args, job, error, attempt, next_run_at)``.
RetriedFn = Callable[[T, JobRow, str, int, datetime], object]
#: A closure of ``on_exhausted_enqueue``: ``(args, job, error, attempt)``.
ExhaustedFn = Callable[[T, JobRow, str, int], object]
#: A closure of ``on_cancelled_enqueue``: ``(args, job, reason)``.
CancelledFn = Callable[[T, JobRow, str], object]
#: A closure of ``on_rescued_enqueue``: ``(args, job, reason)``.
RescuedFn = Callable[[T, JobRow, RescueReason], object]


class TaskDecorator(Protocol[T]):
    """What ``client.task(Args)`` returns: registers a handler of ``Job[Args]``, sync or async."""

    def __call__(self, fn: Callable[[Job[T]], R], /) -> Callable[[Job[T]], R]:
        """Register ``fn`` and return it unchanged."""
        ...


def register_hook(registry: Registry, kind: KindOrType, fn: F | None) -> F | Callable[[F], F]:
    """Add ``fn`` as an ``on_event`` hook of ``kind``; without ``fn``, a decorator that does."""

    def register(f: F) -> F:
        registry.add_hook(kind, f)
        return f

    return register(fn) if fn is not None else register


def register_spec(
    registry: Registry,
    kind: KindOrType,
    outcome: str,
    fn: Callable[..., Any] | None,
    *,
    with_request: bool,
    name: str | None,
) -> Any:
    """Add ``fn`` as a follow-up spec of (``kind``, ``outcome``); without ``fn``, a decorator."""

    def register(f: Callable[..., Any]) -> Callable[..., Any]:
        registry.add_spec(kind, outcome, f, with_request=with_request, name=name)
        return f

    return register(fn) if fn is not None else register
