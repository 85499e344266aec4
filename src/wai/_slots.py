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
    arguments and looking up ``object.__setattr__`` for every field: about half the cost.
    No default is filled in and no ``__post_init__`` runs, so it is for classes without one,
    called with every field.
    """
    setters = tuple(cls.__dict__[f.name].__set__ for f in fields(cls))  # pyright: ignore[reportArgumentType]
    new = object.__new__

    def construct(*values: Any) -> T:
        obj = new(cls)
        for set_field, value in zip(setters, values, strict=True):
            set_field(obj, value)
        return obj

    return construct
