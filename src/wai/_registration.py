"""Registration of hooks and follow-up specs, shared by both clients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from wai.registry import Registry

__all__ = ["RegistrationMixin"]

F = TypeVar("F", bound=Callable[..., Any])
KindOrType = type[Any] | str


class RegistrationMixin:
    """``on_event`` and the twelve ``on_<outcome>_enqueue[_with]`` methods.

    Each works as a call, ``client.on_completed_enqueue(Signup, fn)``, and as a
    decorator, ``@client.on_completed_enqueue(Signup)``. Specs for one (kind,
    outcome) all fire, in registration order, one follow-up each. ``name=`` sets
    the spec's lineage name (default: the closure's qualified name).
    """

    registry: Registry

    @overload
    def on_event(self, kind: KindOrType, fn: None = None) -> Callable[[F], F]: ...
    @overload
    def on_event(self, kind: KindOrType, fn: F) -> F: ...
    def on_event(self, kind: KindOrType, fn: F | None = None) -> F | Callable[[F], F]:
        """Observe the lifecycle events of a kind (``"*"``: every kind): best-effort, after commit.

        ``fn(event)`` may be sync or async; it runs in the process that made the
        transition, never blocks a worker slot, and may be lost on a crash. Use it
        for metrics and logs, never for side effects that must happen.
        """

        def register(f: F) -> F:
            self.registry.add_hook(kind, f)
            return f

        return register(fn) if fn is not None else register

    def _spec(
        self,
        kind: KindOrType,
        outcome: str,
        fn: Callable[..., Any] | None,
        with_request: bool,
        name: str | None,
    ) -> Any:
        def register(f: Callable[..., Any]) -> Callable[..., Any]:
            self.registry.add_spec(kind, outcome, f, with_request=with_request, name=name)
            return f

        return register(fn) if fn is not None else register

    def on_completed_enqueue(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Enqueue ``fn(args, job)``'s result with every completion, in the same transaction."""
        return self._spec(kind, "completed", fn, False, name)

    def on_completed_enqueue_with(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Like :meth:`on_completed_enqueue`; ``fn`` returns a :class:`wai.EnqueueRequest`."""
        return self._spec(kind, "completed", fn, True, name)

    def on_retried_enqueue(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Enqueue ``fn(args, job, error, attempt, next_run_at)``'s result on each retry."""
        return self._spec(kind, "retried", fn, False, name)

    def on_retried_enqueue_with(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Like :meth:`on_retried_enqueue`; ``fn`` returns a :class:`wai.EnqueueRequest`."""
        return self._spec(kind, "retried", fn, True, name)

    def on_exhausted_enqueue(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Enqueue ``fn(args, job, error, attempt)``'s result when the job fails for good."""
        return self._spec(kind, "exhausted", fn, False, name)

    def on_exhausted_enqueue_with(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Like :meth:`on_exhausted_enqueue`; ``fn`` returns a :class:`wai.EnqueueRequest`."""
        return self._spec(kind, "exhausted", fn, True, name)

    def on_cancelled_enqueue(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Enqueue ``fn(args, job, reason)``'s result when the job is cancelled."""
        return self._spec(kind, "cancelled", fn, False, name)

    def on_cancelled_enqueue_with(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Like :meth:`on_cancelled_enqueue`; ``fn`` returns a :class:`wai.EnqueueRequest`."""
        return self._spec(kind, "cancelled", fn, True, name)

    def on_waiting_for_callback_enqueue(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Enqueue ``fn(args, job)``'s result when the job parks for an external callback."""
        return self._spec(kind, "waiting_for_callback", fn, False, name)

    def on_waiting_for_callback_enqueue_with(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Like :meth:`on_waiting_for_callback_enqueue`, returning a :class:`wai.EnqueueRequest`."""
        return self._spec(kind, "waiting_for_callback", fn, True, name)

    def on_rescued_enqueue(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Enqueue ``fn(args, job, reason)``'s result when maintenance rescues an attempt."""
        return self._spec(kind, "rescued", fn, False, name)

    def on_rescued_enqueue_with(
        self, kind: KindOrType, fn: Callable[..., Any] | None = None, *, name: str | None = None
    ) -> Any:
        """Like :meth:`on_rescued_enqueue`; ``fn`` returns a :class:`wai.EnqueueRequest`."""
        return self._spec(kind, "rescued", fn, True, name)
