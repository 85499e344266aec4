"""Cron expressions for periodic jobs: parsing and time-zone-aware fire times.

Pure code: no I/O, no database, standard library only.

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
of them is ``*`` or ``?``, only the other one constrains. (``*/2`` counts as restricted.)
Expressions that can never fire, such as ``0 0 30 2 *``, are rejected.

Time zones
----------
Fields are matched against the local wall-clock time in the schedule's zone. Fire times
are returned as aware UTC datetimes, strictly increasing and without duplicates.

1. Spring-forward gap: a local time that does not exist fires once, at the same
   wall-clock time shifted forward by the gap. A daily ``30 2 * * *`` job in
   America/New_York fires at 03:30 EDT (07:30 UTC) on the spring-forward day. When the
   shifted time coincides with another fire time, the job fires once.
2. Fall-back overlap: a local time that occurs twice fires only at its first occurrence,
   except when the hour field matches every hour (``*`` or equivalent): then it fires at
   both. So ``30 1 * * *`` fires once on the fall-back day, while ``0 * * * *`` fires on
   each of the day's 25 real hours and ``*/15 * * * *`` every 15 real minutes.
3. Outside transitions, fires are at the obvious local times.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal, NoReturn
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from wai.errors import ValidationError

__all__ = ["CronExpression", "MissedFirePolicy", "due_fires", "parse_zone"]

MissedFirePolicy = Literal["coalesce", "catch_up"]
"""What a schedule does about fires it missed: ``"catch_up"`` owes every one of them,
``"coalesce"`` only the latest."""

_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES, 1)}
_DAYS = {d: i for i, d in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
# (name, min, max, names) per field, in six-field order.
_Spec = tuple[str, int, int, dict[str, int]]
_SPECS: tuple[_Spec, ...] = (
    ("second", 0, 59, {}),
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTH_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # longest length per month
_SEARCH_YEARS = 10  # every valid expression fires at least once in any 8 years (Feb 29)
_PROBES = tuple(timedelta(hours=h) for h in range(-54, 55, 6))


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
    _seconds: tuple[int, ...] = field(repr=False)
    _minutes: tuple[int, ...] = field(repr=False)
    _hours: tuple[int, ...] = field(repr=False)
    _doms: frozenset[int] = field(repr=False)
    _months: frozenset[int] = field(repr=False)
    _dows: frozenset[int] = field(repr=False)
    _dom_any: bool = field(repr=False)
    _dow_any: bool = field(repr=False)

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
        if not has_seconds:
            fields.insert(0, "0")
        sec, mins, hrs, doms, months, dows = (
            _parse_field(expr, f, spec) for f, spec in zip(fields, _SPECS, strict=True)
        )
        dows = frozenset(d % 7 for d in dows)
        dom_any, dow_any = fields[3] in ("*", "?"), fields[5] in ("*", "?")
        if not dom_any and dow_any and not any(d <= _MONTH_DAYS[m] for m in months for d in doms):
            _fail(expr, "it can never fire: no month in the month field has that day-of-month")
        return cls(
            text, has_seconds, tuple(sorted(sec)), tuple(sorted(mins)), tuple(sorted(hrs)),
            frozenset(doms), frozenset(months), dows, dom_any, dow_any,
        )  # fmt: skip

    def next_after(self, after: datetime, zone: ZoneInfo) -> datetime:
        """Return the first fire instant strictly after ``after``, as an aware UTC datetime.

        ``after`` must be aware: a naive datetime raises :class:`ValidationError`.
        """
        found = self._nearest(_aware(after, "after"), zone, forward=True)
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
        fires: list[datetime] = []
        current = _aware(start, "start")
        while len(fires) < limit:
            nxt = self._nearest(current, zone, forward=True)
            if nxt is None or nxt > end:
                break
            fires.append(nxt)
            current = nxt
        return fires

    def _latest_at_or_before(self, ref: datetime, zone: ZoneInfo) -> datetime | None:
        return self._nearest(_aware(ref, "now"), zone, forward=False)

    def _nearest(self, ref: datetime, zone: ZoneInfo, *, forward: bool) -> datetime | None:
        # forward: the earliest instant > ref; backward: the latest instant <= ref.
        # Instants are not monotonic in local time near transitions, so the local scan
        # starts, and stops, a margin (twice the nearby offset change) beyond the target.
        ref = ref.astimezone(UTC)
        margin = _margin(ref, zone)
        start = _wall(ref, zone) + (-margin if forward else margin)
        best: datetime | None = None
        stop: datetime | None = None
        for local in self._scan(start.replace(microsecond=0), forward=forward):
            if stop is not None and (local > stop if forward else local < stop):
                break
            for inst in self._instants(local, zone):
                if (inst > ref if forward else inst <= ref) and (
                    best is None or (inst < best if forward else inst > best)
                ):
                    best = inst
                    if stop is None:
                        m = _margin(best, zone)
                        stop = _wall(best, zone) + (m if forward else -m)
        return best

    def _instants(self, local: datetime, zone: ZoneInfo) -> list[datetime]:
        # fold=0 gives the first occurrence in an overlap, and a gap time shifted forward.
        first = local.replace(tzinfo=zone, fold=0).astimezone(UTC)
        second = local.replace(tzinfo=zone, fold=1).astimezone(UTC)
        if second > first and len(self._hours) == 24:  # overlap, every hour matches
            return [first, second]
        return [first]

    def _scan(self, start: datetime, *, forward: bool) -> Iterator[datetime]:
        # Matching naive local times from ``start`` (inclusive), in the given direction.
        day, bound = start.date(), start.time()
        step = timedelta(days=1 if forward else -1)
        while abs(day.year - start.year) <= _SEARCH_YEARS:
            try:
                if day.month not in self._months:
                    bound = None
                    first = day.replace(day=1)
                    day = (first + timedelta(days=32)).replace(day=1) if forward else first + step
                    continue
                if self._day_matches(day):
                    for t in self._times(bound, forward=forward):
                        yield datetime.combine(day, t)
                bound = None
                day += step
            except OverflowError:
                return

    def _day_matches(self, day: date) -> bool:
        dom_ok = day.day in self._doms
        dow_ok = day.isoweekday() % 7 in self._dows
        if self._dom_any or self._dow_any:
            return dom_ok and dow_ok  # the `*` side matches every day
        return dom_ok or dow_ok

    def _times(self, bound: time | None, *, forward: bool) -> Iterator[time]:
        def pick(values: tuple[int, ...], limit: int | None) -> tuple[int, ...]:
            ordered = values if forward else values[::-1]
            if limit is None:
                return ordered
            return tuple(v for v in ordered if (v >= limit if forward else v <= limit))

        for h in pick(self._hours, None if bound is None else bound.hour):
            h_tight = bound is not None and h == bound.hour
            for m in pick(self._minutes, bound.minute if bound and h_tight else None):
                m_tight = h_tight and bound is not None and m == bound.minute
                for s in pick(self._seconds, bound.second if bound and m_tight else None):
                    yield time(h, m, s)


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


def _parse_field(expr: str, text: str, spec: _Spec) -> set[int]:
    name, lo, hi, _ = spec
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            _fail(expr, f"{name} field {text!r} has an empty list item")
        if "#" in item:
            _fail(expr, f"{name} item {item!r} uses '#', which is not supported")
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not (step_text.isascii() and step_text.isdigit()) or int(step_text) == 0:
                _fail(expr, f"{name} step {step_text!r} is not a positive integer")
            step = int(step_text)
        if base in ("*", "?"):
            if base == "?" and name not in ("day-of-month", "day-of-week"):
                _fail(expr, f"{name} does not accept '?' (only day-of-month and day-of-week do)")
            first, last = lo, hi
        elif "-" in base:
            a, b = base.split("-", 1)
            first, last = _value(expr, a, spec), _value(expr, b, spec)
            if name == "day-of-week" and b.upper() == "SUN":
                last = 7
            if first > last:
                _fail(expr, f"{name} range {base!r} is reversed ({first} > {last})")
        else:
            first = _value(expr, base, spec)
            last = hi if slash else first
        values.update(range(first, last + 1, step))
    return values


def _value(expr: str, token: str, spec: _Spec) -> int:
    name, lo, hi, names = spec
    upper = token.upper()
    if token.isascii() and token.isdigit():
        value = int(token)
    elif upper in names:
        value = names[upper]
    elif not token:
        _fail(expr, f"{name} has a missing value")
    elif set(upper) <= set("0123456789LW"):
        _fail(expr, f"{name} value {token!r} uses L/W syntax, which is not supported")
    else:
        _fail(expr, f"{name} value {token!r} is not a number{' or a known name' * bool(names)}")
    if not lo <= value <= hi:
        _fail(expr, f"{name} value {value} is out of range {lo}-{hi}")
    return value


def _aware(value: datetime, what: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"{what} must be a timezone-aware datetime, got naive {value}")
    return value


def _wall(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None, fold=0)


def _margin(instant: datetime, zone: ZoneInfo) -> timedelta:
    # Twice the UTC-offset change within ~2 days of ``instant``: zero away from transitions.
    offsets = [(instant + p).astimezone(zone).utcoffset() or timedelta(0) for p in _PROBES]
    return 2 * (max(offsets) - min(offsets))
