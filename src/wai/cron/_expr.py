"""Cron expressions for periodic jobs: parsing and time-zone-aware fire times.

Pure code: no I/O, no database. `cronsim <https://pypi.org/project/cronsim/>`_ parses the
expression and computes the fire times. wai keeps a thin layer around it: it spells the
extras it documents (``?``, the ``@`` macros, ranges ending on ``SUN``, a ``*`` item in a
restricted day field) in cronsim's syntax, rejects what it documents as unsupported
(``L``, ``W`` and ``#``, some of which cronsim accepts), and turns cronsim's terse
``Bad minute`` into a message that names the field and the problem.

Why cronsim rather than croniter: both are maintained and permissively licensed (cronsim
BSD-3-Clause, croniter MIT), and both cover the syntax wai documents (cronsim once wai
spells ``?`` and the ``@`` macros out for it). cronsim wins on the rest: it has no
dependencies and ships type information; it is small enough to read; it computes fire
times three to four times faster; and its DST rule is Debian cron's, which fires a daily
job **once** on the fall-back day, where croniter fires it at both occurrences of the
repeated hour — a duplicate job nobody asked for.

Syntax
------
Five fields ``minute hour day-of-month month day-of-week``, or six with a leading
``second`` field. Fields are separated by whitespace; surrounding whitespace is ignored.

=============  =======  ==========================================
field          values   names
=============  =======  ==========================================
second         0-59
minute         0-59
hour           0-23
day-of-month   1-31
month          1-12     JAN-DEC
day-of-week    0-7      SUN-SAT (0 and 7 are both Sunday)
=============  =======  ==========================================

Each field is ``*``, a number, a range ``a-b``, a step ``*/n``, ``a-b/n`` or ``a/n``
(meaning ``a-max/n``), or a comma list of these. Names are case-insensitive and may be
used in ranges (``MON-FRI``, ``jan-mar``; ``FRI-SUN`` runs to Sunday). ``?`` means ``*``
in day-of-month and day-of-week. Macros: ``@yearly``/``@annually`` (``0 0 1 1 *``),
``@monthly`` (``0 0 1 * *``), ``@weekly`` (``0 0 * * 0``), ``@daily``/``@midnight``
(``0 0 * * *``) and ``@hourly`` (``0 * * * *``). ``L``, ``W`` and ``#`` are not supported.

Days follow the classic cron rule: when both day-of-month and day-of-week are restricted
(neither is literally ``*`` or ``?``), a day matches if *either* field matches; when one
of them is ``*`` or ``?``, only the other one constrains. (``*/2`` counts as restricted,
unlike in Vixie cron and cronsim: wai spells it ``1-31/2`` for cronsim.)
Expressions that can never fire, such as ``0 0 30 2 *``, are rejected.

Time zones
----------
Fields are matched against the local wall-clock time in the schedule's zone. Fire times
are returned as aware UTC datetimes, strictly increasing and without duplicates. Around
DST transitions wai follows cronsim, which follows Debian cron:

1. **Wall-clock schedules** — five fields, and neither the minute nor the hour field
   starts with ``*`` (``30 2 * * *``, ``0 9-17 * * MON-FRI``, ``0 0-23 * * *``):

   - spring forward: local times that do not exist fire once, at the first instant after
     the gap. A daily ``30 2 * * *`` job in America/New_York fires at 03:00 EDT (07:00
     UTC) on the spring-forward day; ``0,30 2,3 * * *`` fires at 03:00 and 03:30.
   - fall back: a local time that occurs twice fires once, at its first occurrence
     (``30 1 * * *`` in New York: 01:30 EDT only).

2. **Real-clock schedules** — the minute or the hour field starts with ``*``
   (``*/15 * * * *``, ``0 * * * *``, ``*/5 2 * * *``), and every six-field expression: the
   schedule fires at every real instant whose local time matches. Nothing fires for
   local times in a spring-forward gap (``*/30 * * * *`` goes from 01:30 to 03:00;
   ``0 30 2 * * *`` skips that day), and a local time that occurs twice fires at both
   occurrences (``0 * * * *`` fires on each of the 25 real hours of the fall-back day).

3. Outside transitions, fires are at the obvious local times.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice, takewhile
from typing import Literal, NoReturn
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from wai.errors import ValidationError

__all__ = ["CronExpression", "MissedFirePolicy", "due_fires", "parse_zone"]

MissedFirePolicy = Literal["coalesce", "catch_up"]
"""What a schedule does about fires it missed: ``"catch_up"`` owes every one of them,
``"coalesce"`` only the latest."""

# (min, max) per field, in six-field order; cronsim names its fields the same way.
_RANGES = {
    "second": (0, 59),
    "minute": (0, 59),
    "hour": (0, 23),
    "day-of-month": (1, 31),
    "month": (1, 12),
    "day-of-week": (0, 7),
}
_FIELDS = tuple(_RANGES)
_DAY_FIELDS = ("day-of-month", "day-of-week")
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_LW_VALUE = re.compile(r"[0-9LW]*[LW][0-9LW]*", re.IGNORECASE)  # L, LW, 15W, 5L...
_PROBE_START = datetime(2000, 1, 1, tzinfo=UTC)


def parse_zone(name: str) -> ZoneInfo:
    """Return the IANA time zone ``name`` (``"UTC"``, ``"Europe/Paris"``, ...).

    Raises :class:`ValidationError` for anything that is not a known zone name.
    """
    problem = f'unknown time zone {name!r}: use an IANA name like "Europe/Paris"'
    if not isinstance(name, str) or not name:
        raise ValidationError(problem)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValidationError(problem) from None


@dataclass(frozen=True, slots=True)
class CronExpression:
    """A parsed cron expression; build one with :meth:`CronExpression.parse`."""

    expr: str
    has_seconds: bool
    _cronsim: str = field(repr=False)  # the same schedule in the syntax cronsim reads

    @classmethod
    def parse(cls, expr: str) -> CronExpression:
        """Parse a 5- or 6-field expression or a macro; :class:`ValidationError` if invalid."""
        if not isinstance(expr, str):
            _fail(expr, f"expected a string, got {type(expr).__name__}")
        text = " ".join(expr.split())
        if text.startswith("@"):
            text = text.lower()
            if text not in _MACROS:
                _fail(expr, f"unknown macro; use one of {', '.join(_MACROS)}")
        fields = _MACROS.get(text, text).split()
        if len(fields) not in (5, 6):
            _fail(
                expr,
                "expected 5 fields (minute hour day-of-month month day-of-week) or 6 fields "
                f"(with a leading second), got {len(fields)}",
            )
        has_seconds = len(fields) == 6
        names = _FIELDS if has_seconds else _FIELDS[1:]
        spelled = " ".join(_spell(n, f) for n, f in zip(names, fields, strict=True))
        try:
            CronSim(spelled, _PROBE_START)
            refused = False
        except (CronSimError, ValueError):  # ValueError: int() refuses over 4300 digits
            refused = True
        if problem := _problem(names, fields, refused=refused):
            _fail(expr, problem)
        return cls(text, has_seconds, spelled)

    def next_after(self, after: datetime, zone: ZoneInfo) -> datetime:
        """Return the first fire instant strictly after ``after``, as an aware UTC datetime.

        ``after`` must be aware: a naive datetime raises :class:`ValidationError`.
        """
        found = next(self._fires_after(_aware(after, "after"), zone), None)
        if found is None:
            raise ValidationError(f"cron expression {self.expr!r} has no fire time after {after}")
        return found

    def fires_between(
        self, start: datetime, end: datetime, zone: ZoneInfo, *, limit: int
    ) -> list[datetime]:
        """Return the fire instants in ``(start, end]`` in ascending order (UTC, aware).

        At most ``limit`` instants are returned: the earliest ones. Naive datetimes or a
        negative ``limit`` raise :class:`ValidationError`.
        """
        end = _aware(end, "end")
        if limit < 0:
            raise ValidationError(f"limit must be >= 0, got {limit}")
        fires = self._fires_after(_aware(start, "start"), zone)
        return list(islice(takewhile(lambda t: t <= end, fires), limit))

    def _fires_after(self, after: datetime, zone: ZoneInfo) -> Iterator[datetime]:
        # cronsim walks wall-clock time for wall-clock schedules, so from a start in the
        # second pass of a fall-back hour it first yields that hour's (earlier) first-pass
        # fires: only instants past everything yielded so far are new.
        last = after.astimezone(UTC)
        try:
            for local in CronSim(self._cronsim, last.astimezone(zone)):
                instant = local.astimezone(UTC)
                if instant > last:
                    last = instant
                    yield instant
        except OverflowError:  # the search ran past datetime.max
            return

    def _latest_at_or_before(self, ref: datetime, zone: ZoneInfo) -> datetime | None:
        ref = _aware(ref, "now").astimezone(UTC)
        reverse = CronSim(self._cronsim, ref.astimezone(zone), reverse=True)
        found: datetime | None = None
        try:
            for local in reverse:
                if (instant := local.astimezone(UTC)) <= ref:
                    found = instant
                    break
        except OverflowError:  # the search ran past datetime.min
            return None
        if found is None:
            return None
        # That is a fire at or before ``ref``, but maybe not the latest: the reverse search
        # skips ``ref`` itself, and walks wall-clock time, where the first pass of a
        # fall-back hour sorts after a ``ref`` in the second pass. Step forward from it.
        for later in self._fires_after(found, zone):
            if later > ref:
                break
            found = later
        return found


def due_fires(
    expr: CronExpression,
    zone: ZoneInfo,
    cursor: datetime,
    now: datetime,
    policy: MissedFirePolicy,
    *,
    limit: int = 1000,
) -> list[datetime]:
    """Return the fires a schedule owes at ``now``: those in ``(cursor, now]``.

    ``cursor`` is the last fire time already enqueued (or the schedule's creation time).
    ``"catch_up"`` returns all of them in order, at most ``limit`` (the earliest; call
    again from the last one to continue). ``"coalesce"`` returns only the latest one, as
    a list of zero or one instant, without enumerating the missed fires. Any other policy
    or naive datetimes raise :class:`ValidationError`.
    """
    if policy == "catch_up":
        return expr.fires_between(cursor, now, zone, limit=limit)
    if policy == "coalesce":
        cursor = _aware(cursor, "cursor")
        latest = expr._latest_at_or_before(now, zone)  # pyright: ignore[reportPrivateUsage]
        return [latest] if latest is not None and latest > cursor else []
    raise ValidationError(f"unknown missed-fire policy {policy!r}: use 'coalesce' or 'catch_up'")


def _fail(expr: object, problem: str) -> NoReturn:
    raise ValidationError(f"invalid cron expression {expr!r}: {problem}")


def _spell(name: str, text: str) -> str:
    """Return field ``name`` in the syntax cronsim reads (which takes names in any case).

    The text keeps a leading ``*`` in the minute and hour fields: cronsim's DST rule
    looks for one there.
    """
    if name in _DAY_FIELDS and text in ("*", "?"):
        return "*"
    return ",".join(_spell_item(name, item) for item in text.split(","))


def _spell_item(name: str, item: str) -> str:
    base, slash, step = item.partition("/")
    if name in _DAY_FIELDS and base in ("*", "?"):
        # cronsim (like Vixie cron) reads a day field that starts with `*` as
        # unrestricted; wai documents `*/2` and `*,5` as restricted: spell the range.
        low, high = _RANGES[name]
        base = f"{low}-{high}"
    elif name == "day-of-week" and base.upper().endswith("-SUN"):
        base = f"{base[:-3]}7"  # SUN is 0 to cronsim; `FRI-SUN` runs up to Sunday, 7
    return f"{base}{slash}{step}"


def _problem(names: tuple[str, ...], fields: list[str], *, refused: bool) -> str | None:
    """The first problem in the expression, in reading order, or None if there is none.

    wai itself rejects ``#``, ``L`` and ``W`` (cronsim accepts some of them); when cronsim
    ``refused`` the expression, each item is also put to cronsim to find the culprit.
    """
    for name, text in zip(names, fields, strict=True):
        for item in text.split(","):
            if problem := _item_problem(name, text, item, probe=refused):
                return problem
    if not refused:
        return None
    # Every item reads fine alone: cronsim's one check across fields, a day-of-month that
    # no month in the month field has (when day-of-week is `*`), refused the expression.
    return "it can never fire: no month in the month field has that day-of-month"


def _item_problem(name: str, text: str, item: str, *, probe: bool) -> str | None:
    """The problem in one list ``item`` of field ``name`` (``text``), or None."""
    if not item:
        return f"{name} field {text!r} has an empty list item"
    if "#" in item:
        return f"{name} item {item!r} uses '#', which is not supported"
    base, slash, step = item.partition("/")
    if slash and not (step.isascii() and step.isdigit() and step.lstrip("0")):
        return f"{name} step {step!r} is not a positive integer"
    if base == "?" and name not in _DAY_FIELDS:
        return f"{name} does not accept '?' (only day-of-month and day-of-week do)"
    if base not in ("*", "?"):
        first, dash, last = base.partition("-")
        for value in (first, last) if dash else (first,):
            if _LW_VALUE.fullmatch(value):
                return f"{name} value {value!r} uses L/W syntax, which is not supported"
            # As a range `v-v`, cronsim reads `v` as one value (a lone `*` means "every").
            if probe and not _accepts(name, f"{value}-{value}"):
                if not value:
                    return f"{name} has a missing value"
                if value.isascii() and value.isdigit():
                    low, high = _RANGES[name]
                    return f"{name} value {value.lstrip('0') or '0'} is out of range {low}-{high}"
                names = " or a known name" if name in ("month", "day-of-week") else ""
                return f"{name} value {value!r} is not a number{names}"
        if probe and dash and not _accepts(name, _spell_item(name, base)):
            return f"{name} range {base!r} is reversed (its start is after its end)"
    if probe and not _accepts(name, _spell_item(name, item)):
        return f"{name} step {step!r} is too large"  # int() refuses over 4300 digits
    return None


def _accepts(name: str, text: str) -> bool:
    """Whether cronsim reads ``text`` as field ``name`` (with ``*`` in the other fields)."""
    fields = ["*"] * len(_FIELDS)
    fields[_FIELDS.index(name)] = text
    try:
        CronSim(" ".join(fields), _PROBE_START)
    except (CronSimError, ValueError):
        return False
    return True


def _aware(value: datetime, what: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"{what} must be a timezone-aware datetime, got naive {value}")
    return value
