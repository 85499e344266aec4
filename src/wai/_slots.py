"""A positional constructor for the frozen slots dataclasses built once per job of a batch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

__all__ = ["positional_constructor"]

T = TypeVar("T")


def positional_constructor(cls: type[T]) -> Callable[..., T]:
    """A function that builds a ``cls`` from its field values, in field order.

    It stores each value through the field's slot, as the ``__init__`` that
    ``@dataclass(frozen=True, slots=True)`` generates does, without binding keyword
    arguments and looking up ``object.__setattr__`` for every field: well under half the
    cost. Like that ``__init__`` it is generated source, one line per field, so no loop
    runs per call. No default is filled in and no ``__post_init__`` runs, so it is for
    classes without one, called with every field (a missing or extra value is a
    ``TypeError``).
    """
    names = [f.name for f in fields(cls)]  # pyright: ignore[reportArgumentType]
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for i, name in enumerate(names):
        namespace[f"_set{i}"] = cls.__dict__[name].__set__
    params = ", ".join(f"v{i}" for i in range(len(names)))
    stores = "".join(f"    _set{i}(obj, v{i})\n" for i in range(len(names)))
    source = f"def construct({params}):\n    obj = _new(_cls)\n{stores}    return obj\n"
    exec(source, namespace)  # noqa: S102 - the text is built here from field positions only
    construct: Callable[..., T] = namespace["construct"]
    construct.__qualname__ = f"positional_constructor.<{cls.__name__}>"
    return construct
