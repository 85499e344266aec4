"""Registration of hooks and follow-up specs, as a call or as a decorator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from wai._registry import Registry

__all__ = ["KindOrType", "register_hook", "register_spec"]

F = TypeVar("F", bound=Callable[..., Any])

#: What ``on_event`` and the ``on_<outcome>_enqueue`` methods take as the kind.
KindOrType = type[Any] | str


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
