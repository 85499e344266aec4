from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from wai._slots import positional_constructor


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    x: int
    y: str
    z: list[int] | None = None


def test_positional_constructor_builds_the_same_frozen_object() -> None:
    make = positional_constructor(Point)
    made = make(1, "a", [2])
    assert made == Point(x=1, y="a", z=[2])
    assert type(made) is Point
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.x = 2  # pyright: ignore[reportAttributeAccessIssue]


def test_positional_constructor_needs_every_field() -> None:
    make = positional_constructor(Point)
    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        make(1, "a")
    with pytest.raises(TypeError, match="takes 3 positional arguments but 4 were given"):
        make(1, "a", None, 4)
