"""Durations in seconds that PostgreSQL can add to a timestamp (pure, no I/O).

A delay, deadline or retention reaches the database as ``make_interval(secs => ...)``
added to ``now()``: NaN, infinities and values beyond an interval's range make that
statement fail (and with it every job sharing it). Such durations are refused where
they are built, with a :class:`wai.ValidationError` naming the parameter.
"""

from __future__ import annotations

import math

from wai.errors import ValidationError

__all__ = ["MAX_SECONDS", "check_seconds"]

#: The longest duration wai accepts anywhere: 100 years, in seconds.
MAX_SECONDS = 100 * 365 * 24 * 3600.0


def check_seconds(value: object, field: str, *, allow_zero: bool = False) -> float:
    """``value`` as float seconds if it is a finite number in (0, MAX_SECONDS].

    With ``allow_zero``, 0 is accepted too. Refuses bools, NaN, infinities and
    negative numbers with a :class:`wai.ValidationError` naming ``field``.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not allow_zero)
        or value > MAX_SECONDS
    ):
        low = "[0" if allow_zero else "(0"
        raise ValidationError(
            f"{field} must be a number of seconds in {low}, {MAX_SECONDS:.0f}] (100 years), "
            f"got {value!r}"
        )
    return float(value)
