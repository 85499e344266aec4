"""Body fields of the flow control endpoint: a rate limit object, and a field that may be null.

``PUT /queues/{name}/limits`` replaces both limits of a queue, so each field is required
and ``null`` lifts its limit (:class:`Nullable`). A rate limit is an object of ``limit``,
``per`` and ``burst`` (:class:`RateLimitObject`), checked member by member with the bounds
of :class:`wai.RateLimit`; an error names the member (``rate_limit.per``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final

from wai._flow import MAX_LIMIT, RateLimit
from wai.errors import ValidationError
from wai.web._params import Integer, ParamType

__all__ = ["COUNT", "MAX_PER", "MIN_PER", "Nullable", "RateLimitObject"]

#: How many jobs a rate limit, its burst or a global concurrency may count.
COUNT: Final = Integer(1, MAX_LIMIT)
#: The bounds of a rate limit's period, in seconds.
MIN_PER: Final = 0.001
MAX_PER: Final = 86_400.0

_MEMBERS = ("limit", "per", "burst")


@dataclass(frozen=True, slots=True)
class Nullable:
    """``inner``'s value, or JSON ``null`` (None). Bodies only: a URL has no null."""

    inner: ParamType

    def from_text(self, name: str, text: str) -> Any:
        """The inner type's reading of ``text`` (a URL has no null)."""
        return self.inner.from_text(name, text)

    def from_json(self, name: str, value: object) -> Any:
        """None for ``null``, else the inner type's value."""
        return None if value is None else self.inner.from_json(name, value)

    def schema(self) -> dict[str, Any]:
        """The inner schema, or ``null``."""
        return {"anyOf": [self.inner.schema(), {"type": "null"}]}


def _per(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not MIN_PER <= value <= MAX_PER
    ):
        raise ValidationError(
            f"{name} must be a number of seconds from {MIN_PER:g} to {MAX_PER:g}, got {value!r:.80}"
        )
    return float(value)


@dataclass(frozen=True, slots=True)
class RateLimitObject:
    """A :class:`wai.RateLimit` as a JSON object: ``limit`` (required), ``per`` (seconds,
    default 1) and ``burst`` (default, or null: a tenth of ``limit``, at least 1)."""

    def from_text(self, name: str, text: str) -> RateLimit:
        """Never in a URL."""
        raise ValidationError(f"{name} must be a JSON object in the body")

    def from_json(self, name: str, value: object) -> RateLimit:
        """Check every member, then build the rate limit."""
        if not isinstance(value, dict):
            raise ValidationError(
                f"{name} must be an object with limit, per and burst, or null; "
                f"got {type(value).__name__}"
            )
        given: dict[object, object] = value  # pyright: ignore[reportUnknownVariableType]
        for key in given:
            if key not in _MEMBERS:
                raise ValidationError(
                    f"unknown field {key!r:.80} in {name} (accepted: {', '.join(_MEMBERS)})"
                )
        if "limit" not in given:
            raise ValidationError(f"{name}.limit is required")
        limit = COUNT.from_json(f"{name}.limit", given["limit"])
        per = _per(f"{name}.per", given.get("per", 1.0))
        burst = given.get("burst")
        if burst is not None:
            burst = COUNT.from_json(f"{name}.burst", burst)
        return RateLimit(limit, per=per, burst=burst)

    def schema(self) -> dict[str, Any]:
        """An object of ``limit``, ``per`` and ``burst``, closed to any other member."""
        return {
            "type": "object",
            "properties": {
                "limit": {**COUNT.schema(), "description": "jobs that start every `per` seconds"},
                "per": {
                    "type": "number",
                    "minimum": MIN_PER,
                    "maximum": MAX_PER,
                    "default": 1.0,
                    "description": "the period of `limit`, in seconds",
                },
                "burst": {
                    "anyOf": [COUNT.schema(), {"type": "null"}],
                    "default": None,
                    "description": "the most jobs that start at once after a quiet spell "
                    "(default: a tenth of `limit`, at least 1)",
                },
            },
            "required": ["limit"],
            "additionalProperties": False,
        }
