from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from wai.cron._expr import CronExpression, due_fires, parse_zone
from wai.errors import ValidationError

NY = ZoneInfo("America/New_York")
PARIS = ZoneInfo("Europe/Paris")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")
UTC_ZONE = ZoneInfo("UTC")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # pyright: ignore[reportArgumentType]


def local_day(zone: ZoneInfo, y: int, m: int, d: int) -> tuple[datetime, datetime]:
    """The (start, end] bounds that hold exactly the local calendar day's fires."""
    start = datetime(y, m, d, tzinfo=zone) - timedelta(microseconds=1)
    end = datetime(y, m, d, tzinfo=zone) + timedelta(days=1) - timedelta(microseconds=1)
    return start, end


def fires(expr: str, start: datetime, end: datetime, zone: ZoneInfo = UTC_ZONE) -> list[datetime]:
    return CronExpression.parse(expr).fires_between(start, end, zone, limit=100_000)


def minutes_in_hour(expr: str) -> list[int]:
    return [f.minute for f in fires(expr, utc(2024, 1, 1, 9, 59, 59), utc(2024, 1, 1, 10, 59, 59))]


# -- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "minutes"),
    [
        ("* 10 * * *", list(range(60))),
        ("7 10 * * *", [7]),
        ("10-13 10 * * *", [10, 11, 12, 13]),
        ("*/20 10 * * *", [0, 20, 40]),
        ("10-30/10 10 * * *", [10, 20, 30]),
        ("50/4 10 * * *", [50, 54, 58]),
        ("1,5,10-12,40-59/10 10 * * *", [1, 5, 10, 11, 12, 40, 50]),
        ("5,5,5 10 * * *", [5]),
    ],
)
def test_field_forms(expr: str, minutes: list[int]) -> None:
    assert minutes_in_hour(expr) == minutes


def test_expr_is_normalized_and_five_fields_have_no_seconds() -> None:
    cron = CronExpression.parse("  0   12\t* *  MON-fri ")
    assert cron.expr == "0 12 * * MON-fri"
    assert cron.has_seconds is False


def test_six_fields_lead_with_seconds() -> None:
    cron = CronExpression.parse("*/15 30 10 * * *")
    assert cron.has_seconds is True
    got = cron.fires_between(utc(2024, 1, 1), utc(2024, 1, 2), ZoneInfo("UTC"), limit=10)
    assert got == [utc(2024, 1, 1, 10, 30, s) for s in (0, 15, 30, 45)]


def test_every_second_after_a_fractional_instant() -> None:
    cron = CronExpression.parse("* * * * * *")
    after = utc(2024, 1, 1, 12) + timedelta(microseconds=500_000)
    assert cron.next_after(after, ZoneInfo("UTC")) == utc(2024, 1, 1, 12, 0, 1)


def test_month_and_day_names_are_case_insensitive_and_work_in_ranges() -> None:
    start, end = utc(2023, 12, 31), utc(2024, 12, 31)
    by_name = fires("0 0 1 jan-MAR,Dec *", start, end)
    assert [f.month for f in by_name] == [1, 2, 3, 12]
    assert fires("0 0 * * MON-wed", start, end) == fires("0 0 * * 1-3", start, end)
    assert {f.isoweekday() for f in fires("0 0 * * FRI-SUN", start, end)} == {5, 6, 7}


def test_day_of_week_seven_is_sunday() -> None:
    start, end = utc(2024, 1, 1), utc(2024, 3, 1)
    sundays = fires("0 0 * * 0", start, end)
    assert all(f.isoweekday() == 7 for f in sundays)
    assert len(sundays) == 8
    assert fires("0 0 * * 7", start, end) == sundays
    assert fires("0 0 * * SUN", start, end) == sundays
    assert fires("0 0 * * 5-7", start, end) == fires("0 0 * * 0,5,6", start, end)


def test_day_of_month_and_day_of_week_or_rule() -> None:
    start, end = utc(2024, 8, 31), utc(2024, 9, 30)
    either = fires("0 0 13 * FRI", start, end)  # Sept 2024: Fridays 6, 13, 20, 27
    assert [f.day for f in either] == [6, 13, 20, 27]
    either = fires("0 0 1,2 * FRI", start, end)
    assert [f.day for f in either] == [1, 2, 6, 13, 20, 27]
    assert [f.day for f in fires("0 0 * * FRI", start, end)] == [6, 13, 20, 27]
    assert [f.day for f in fires("0 0 1,2 * *", start, end)] == [1, 2]
    assert [f.day for f in fires("0 0 1,2 * ?", start, end)] == [1, 2]
    assert [f.day for f in fires("0 0 ? * FRI", start, end)] == [6, 13, 20, 27]


def test_a_star_step_in_a_day_field_counts_as_restricted() -> None:
    # Either field matching is enough, also when one of them is written `*/n` or `*,n`.
    start, end = utc(2024, 8, 31), utc(2024, 9, 30)
    assert [f.day for f in fires("0 0 */10 * FRI", start, end)] == [1, 6, 11, 13, 20, 21, 27]
    weekends = [f.day for f in fires("0 0 13 * */6", start, end)]  # */6: Sunday, Saturday
    assert weekends == [1, 7, 8, 13, 14, 15, 21, 22, 28, 29]
    assert len(fires("0 0 *,13 * FRI", start, end)) == 30


@pytest.mark.parametrize(
    ("macro", "expansion"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@DAILY", "0 0 * * *"),
    ],
)
def test_macros(macro: str, expansion: str) -> None:
    start, end = utc(2023, 12, 1), utc(2025, 2, 1)
    assert fires(macro, start, end, PARIS) == fires(expansion, start, end, PARIS)
    assert CronExpression.parse(macro).has_seconds is False


@pytest.mark.parametrize(
    ("expr", "needles"),
    [
        ("61 * * * *", ["minute value 61 is out of range 0-59"]),
        ("60 * * * * *", ["second value 60 is out of range 0-59"]),
        ("* 24 * * *", ["hour value 24", "0-23"]),
        ("* * 0 * *", ["day-of-month value 0", "1-31"]),
        ("* * 32 * *", ["day-of-month value 32"]),
        ("* * * 13 *", ["month value 13", "1-12"]),
        ("* * * * 8", ["day-of-week value 8", "0-7"]),
        ("5-1 * * * *", ["minute range '5-1' is reversed"]),
        ("* * * DEC-JAN *", ["month range 'DEC-JAN' is reversed"]),
        ("*/0 * * * *", ["minute step '0'", "positive"]),
        ("* */-2 * * *", ["hour step '-2'", "positive"]),
        ("* * */x * *", ["day-of-month step 'x'", "positive"]),
        ("*/ * * * *", ["minute step ''"]),
        ("1,,2 * * * *", ["minute", "empty list item"]),
        ("* 1, * * *", ["hour", "empty list item"]),
        ("-1 * * * *", ["minute", "missing value"]),
        ("1-2-3 * * * *", ["minute value '2-3'"]),
        ("* * * FOO *", ["month value 'FOO'"]),
        ("* * * * FUNDAY", ["day-of-week value 'FUNDAY'"]),
        ("* * JAN * *", ["day-of-month value 'JAN' is not a number"]),
        ("MON * * * *", ["minute value 'MON'"]),
        ("? * * * *", ["minute does not accept '?'"]),
        ("* * L * *", ["day-of-month", "not supported"]),
        ("* * 15W * *", ["day-of-month", "not supported"]),
        ("* * LW * *", ["day-of-month", "not supported"]),
        ("* * * * 5L", ["day-of-week", "not supported"]),
        ("* * * * 5#3", ["day-of-week", "'#'", "not supported"]),
        ("* * L/2 * *", ["day-of-month value 'L'", "not supported"]),  # cronsim takes it
        ("9" * 5000 + " * * * *", ["minute value 9999", "out of range 0-59"]),
        ("*/" + "9" * 5000 + " * * * *", ["minute step '9999", "too large"]),
        ("* * * *", ["5 fields", "6 fields", "got 4"]),
        ("* * * * * * *", ["5 fields", "6 fields", "got 7"]),
        ("", ["5 fields", "got 0"]),
        ("   ", ["5 fields", "got 0"]),
        ("@reboot", ["unknown macro"]),
        ("0 0 30 2 *", ["never fire", "day-of-month"]),
        ("0 0 31 4,6,9,11 *", ["never fire"]),
        ("0 0 30,31 FEB ?", ["never fire"]),
    ],
)
def test_rejections_quote_the_expression_and_name_the_problem(
    expr: str, needles: list[str]
) -> None:
    with pytest.raises(ValidationError) as info:
        CronExpression.parse(expr)
    message = str(info.value)
    assert message.startswith(f"invalid cron expression {expr!r}: ")
    for needle in needles:
        assert needle in message


@pytest.mark.parametrize("value", [None, 5, b"* * * * *"])
def test_non_string_expression_is_rejected(value: object) -> None:
    with pytest.raises(ValidationError, match="expected a string"):
        CronExpression.parse(value)  # pyright: ignore[reportArgumentType]


def test_impossible_dom_is_accepted_when_day_of_week_can_match() -> None:
    cron = CronExpression.parse("0 0 30 2 MON")  # OR rule: every Monday in February
    assert cron.next_after(utc(2024, 1, 1), ZoneInfo("UTC")) == utc(2024, 2, 5)


# -- parse_zone ------------------------------------------------------------------------------


def test_parse_zone_accepts_iana_names() -> None:
    assert parse_zone("UTC") == ZoneInfo("UTC")
    assert parse_zone("Europe/Paris") is PARIS


@pytest.mark.parametrize(
    "name", ["", "Mars/Olympus", "Europe/Paris ", "../etc/passwd", "/x", None, 3]
)
def test_parse_zone_rejects_unknown_names(name: object) -> None:
    with pytest.raises(ValidationError) as info:
        parse_zone(name)  # pyright: ignore[reportArgumentType]
    assert repr(name) in str(info.value)
    assert '"Europe/Paris"' in str(info.value)


# -- next_after / fires_between ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("0 0 1 * *", utc(2024, 1, 31, 12), utc(2024, 2, 1)),
        ("0 0 31 * *", utc(2024, 1, 31, 0, 0, 1), utc(2024, 3, 31)),
        ("0 0 31 * *", utc(2024, 4, 1), utc(2024, 5, 31)),
        ("59 23 31 12 *", utc(2024, 12, 31, 23, 59), utc(2025, 12, 31, 23, 59)),
        ("@yearly", utc(2024, 6, 1), utc(2025, 1, 1)),
        ("0 0 29 2 *", utc(2024, 2, 29), utc(2028, 2, 29)),
        ("0 0 29 2 *", utc(2023, 3, 1), utc(2024, 2, 29)),
        ("0 0 29 2 *", utc(2096, 3, 1), utc(2104, 2, 29)),  # 2100 is not a leap year
        ("0 0 28-29 2 *", utc(2100, 2, 28), utc(2101, 2, 28)),
        ("0 12 * * *", utc(2024, 1, 1, 11, 59, 59, 999_999), utc(2024, 1, 1, 12)),
        ("0 12 * * *", utc(2024, 1, 1, 12), utc(2024, 1, 2, 12)),
    ],
)
def test_next_after_rollovers(expr: str, after: datetime, expected: datetime) -> None:
    got = CronExpression.parse(expr).next_after(after, ZoneInfo("UTC"))
    assert got == expected
    assert got.tzinfo is UTC


def test_next_after_converts_from_the_schedule_zone() -> None:
    cron = CronExpression.parse("0 9 * * *")
    assert cron.next_after(utc(2024, 1, 15), NY) == utc(2024, 1, 15, 14)  # 09:00 EST
    assert cron.next_after(utc(2024, 7, 15), NY) == utc(2024, 7, 15, 13)  # 09:00 EDT
    # ``after`` may be in any zone; the result is always UTC.
    after = datetime(2024, 7, 15, 9, tzinfo=PARIS)
    assert cron.next_after(after, PARIS) == utc(2024, 7, 16, 7)


def test_naive_datetimes_are_rejected() -> None:
    cron = CronExpression.parse("* * * * *")
    with pytest.raises(ValidationError, match="aware"):
        cron.next_after(datetime(2024, 1, 1), NY)
    with pytest.raises(ValidationError, match="aware"):
        cron.fires_between(utc(2024, 1, 1), datetime(2024, 1, 2), NY, limit=5)


def test_fires_between_is_half_open_ordered_and_limited() -> None:
    cron = CronExpression.parse("*/10 * * * *")
    start, end = utc(2024, 1, 1, 10), utc(2024, 1, 1, 11)
    everything = cron.fires_between(start, end, ZoneInfo("UTC"), limit=100)
    assert everything == [utc(2024, 1, 1, 10, m) for m in (10, 20, 30, 40, 50)] + [end]
    assert cron.fires_between(start, end, ZoneInfo("UTC"), limit=3) == everything[:3]
    assert cron.fires_between(start, end, ZoneInfo("UTC"), limit=0) == []
    assert cron.fires_between(end, start, ZoneInfo("UTC"), limit=10) == []
    with pytest.raises(ValidationError, match="limit"):
        cron.fires_between(start, end, ZoneInfo("UTC"), limit=-1)


def test_leap_day_search_is_fast_enough_to_repeat() -> None:
    cron = CronExpression.parse("0 0 29 2 *")
    got = cron.fires_between(utc(2000, 1, 1), utc(2400, 1, 1), PARIS, limit=1000)
    assert len(got) == 97  # 400 Gregorian years hold 97 leap days
    assert all(f.astimezone(PARIS).day == 29 for f in got)


# -- DST ---------------------------------------------------------------------------------------
# Two rules (see docs/cron.md). Wall-clock schedules (5 fields, minute and hour fields not
# starting with `*`) fire a missing local time once, right after the gap, and a repeated
# local time once, at its first occurrence. Real-clock schedules (minute or hour field
# starting with `*`, and every 6-field expression) fire at each real instant whose local
# time matches: nothing in the gap, both occurrences in the overlap.

BERLIN = ZoneInfo("Europe/Berlin")


def local_times(instants: list[datetime], zone: ZoneInfo) -> list[str]:
    return [i.astimezone(zone).strftime("%H:%M%z") for i in instants]


@pytest.mark.parametrize(
    ("zone", "day", "expr", "expected"),
    [
        # New York, spring forward on 2024-03-10: 02:00 EST -> 03:00 EDT.
        (NY, (2024, 3, 10), "30 2 * * *", ["03:00-0400"]),
        (NY, (2024, 3, 10), "0,15,30,45 2 * * *", ["03:00-0400"]),
        (NY, (2024, 3, 10), "0,30 2,3 * * *", ["03:00-0400", "03:30-0400"]),
        (NY, (2024, 3, 10), "*/30 2 * * *", []),
        (NY, (2024, 3, 10), "*/30 1-3 * * *", ["01:00-0500", "01:30-0500", "03:00-0400",
                                               "03:30-0400"]),
        (NY, (2024, 3, 10), "0 30 2 * * *", []),
        # wai's spelling of `?` and of a `*` in a restricted day field keeps the rule.
        (NY, (2024, 3, 10), "30 2 ? * SUN", ["03:00-0400"]),
        (NY, (2024, 3, 10), "*/30 2 */2 * SUN", []),
        # New York, fall back on 2024-11-03: 02:00 EDT -> 01:00 EST.
        (NY, (2024, 11, 3), "30 1 * * *", ["01:30-0400"]),
        (NY, (2024, 11, 3), "0,30 1 * * *", ["01:00-0400", "01:30-0400"]),
        (NY, (2024, 11, 3), "*/30 1 * * *", ["01:00-0400", "01:30-0400", "01:00-0500",
                                             "01:30-0500"]),
        (NY, (2024, 11, 3), "0 30 1 * * *", ["01:30-0400", "01:30-0500"]),
        (NY, (2024, 11, 3), "30 1 */2 * SUN", ["01:30-0400"]),
        (NY, (2024, 11, 3), "*/30 1 ? * *", ["01:00-0400", "01:30-0400", "01:00-0500",
                                             "01:30-0500"]),
        # Berlin, spring forward on 2024-03-31: 02:00 CET -> 03:00 CEST.
        (BERLIN, (2024, 3, 31), "30 2 * * *", ["03:00+0200"]),
        (BERLIN, (2024, 3, 31), "0 1-3 * * *", ["01:00+0100", "03:00+0200"]),
        (BERLIN, (2024, 3, 31), "*/30 2 * * *", []),
        (BERLIN, (2024, 3, 31), "0 30 2 * * *", []),
        # Berlin, fall back on 2024-10-27: 03:00 CEST -> 02:00 CET.
        (BERLIN, (2024, 10, 27), "30 2 * * *", ["02:30+0200"]),
        (BERLIN, (2024, 10, 27), "0 1-3 * * *", ["01:00+0200", "02:00+0200", "03:00+0100"]),
        (BERLIN, (2024, 10, 27), "*/30 2 * * *", ["02:00+0200", "02:30+0200", "02:00+0100",
                                                  "02:30+0100"]),
        (BERLIN, (2024, 10, 27), "0 30 2 * * *", ["02:30+0200", "02:30+0100"]),
    ],
)  # fmt: skip
def test_dst_transitions_fire_exactly_these_local_times(
    zone: ZoneInfo, day: tuple[int, int, int], expr: str, expected: list[str]
) -> None:
    got = fires(expr, *local_day(zone, *day), zone)
    assert local_times(got, zone) == expected
    assert got == sorted(set(got))


def test_new_york_spring_forward_daily_job_fires_right_after_the_gap() -> None:
    got = fires("30 2 * * *", *local_day(NY, 2024, 3, 10), NY)
    assert got == [utc(2024, 3, 10, 7)]  # 03:00 EDT, the instant clocks jump
    day_before_and_after = fires("30 2 * * *", utc(2024, 3, 9), utc(2024, 3, 12), NY)
    assert local_times(day_before_and_after, NY) == ["02:30-0500", "03:00-0400", "02:30-0400"]


def test_new_york_spring_forward_half_hourly_job() -> None:
    got = fires("*/30 * * * *", *local_day(NY, 2024, 3, 10), NY)
    assert len(got) == 46  # a 23-hour day
    locals_ = local_times(got, NY)
    assert "01:30-0500" in locals_
    assert locals_[3:5] == ["01:30-0500", "03:00-0400"]
    assert got == sorted(set(got))


def test_berlin_spring_forward() -> None:
    assert fires("30 2 * * *", *local_day(BERLIN, 2024, 3, 31), BERLIN) == [utc(2024, 3, 31, 1)]
    got = fires("*/30 * * * *", *local_day(BERLIN, 2024, 3, 31), BERLIN)
    assert len(got) == 46
    assert local_times(got, BERLIN)[3:5] == ["01:30+0100", "03:00+0200"]


def test_new_york_fall_back() -> None:
    day = local_day(NY, 2024, 11, 3)
    assert fires("30 1 * * *", *day, NY) == [utc(2024, 11, 3, 5, 30)]  # first 01:30 (EDT)
    hourly = fires("0 * * * *", *day, NY)
    assert len(hourly) == 25
    assert local_times(hourly, NY)[:4] == ["00:00-0400", "01:00-0400", "01:00-0500", "02:00-0500"]
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(hourly))
    quarter = fires("*/15 * * * *", *day, NY)
    assert len(quarter) == 100
    assert all(b - a == timedelta(minutes=15) for a, b in itertools.pairwise(quarter))


def test_berlin_fall_back() -> None:
    day = local_day(BERLIN, 2024, 10, 27)
    assert fires("30 2 * * *", *day, BERLIN) == [utc(2024, 10, 27, 0, 30)]  # first (CEST)
    assert len(fires("0 * * * *", *day, BERLIN)) == 25  # real clock: the hour field is `*`
    assert len(fires("*/15 * * * *", *day, BERLIN)) == 100
    assert len(fires("0 0-23 * * *", *day, BERLIN)) == 24  # wall clock: each hour once
    assert len(fires("0 2,3 * * *", *day, BERLIN)) == 2


def test_lord_howe_half_hour_shifts() -> None:
    # 2024-04-07 02:00 LHDT (+11) -> 01:30 LHST (+10:30); 2024-10-06 02:00 -> 02:30.
    back = local_day(LORD_HOWE, 2024, 4, 7)
    assert len(fires("*/15 * * * *", *back, LORD_HOWE)) == 98
    assert len(fires("0 * * * *", *back, LORD_HOWE)) == 24
    assert local_times(fires("45 1 * * *", *back, LORD_HOWE), LORD_HOWE) == ["01:45+1100"]
    forward = local_day(LORD_HOWE, 2024, 10, 6)
    assert len(fires("*/15 * * * *", *forward, LORD_HOWE)) == 94
    assert local_times(fires("15 2 * * *", *forward, LORD_HOWE), LORD_HOWE) == ["02:30+1100"]
    assert len(fires("0 * * * *", *forward, LORD_HOWE)) == 23  # 02:00 never happens


def wall(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None)


def reference_fires(
    minutes: set[int],
    hours: set[int],
    zone: ZoneInfo,
    start: datetime,
    end: datetime,
    *,
    wall_clock: bool,
) -> list[datetime]:
    """Brute force over every minute, applying the documented DST rules."""
    found: set[datetime] = set()
    if wall_clock:  # every matching local time, at its first occurrence or after its gap
        local = wall(start, zone).replace(second=0, microsecond=0) - timedelta(days=2)
        last = wall(end, zone) + timedelta(days=2)
        while local <= last:
            if local.minute in minutes and local.hour in hours:
                first = local.replace(tzinfo=zone).astimezone(UTC)
                if wall(first, zone) != local:  # in a gap: the first real minute after it
                    first = local.replace(tzinfo=zone, fold=1).astimezone(UTC)
                    while wall(first, zone) <= local:
                        first += timedelta(minutes=1)
                found.add(first)
            local += timedelta(minutes=1)
    else:  # every real minute whose local time matches
        instant = start.replace(second=0, microsecond=0) - timedelta(days=2)
        while instant <= end + timedelta(days=2):
            local = wall(instant, zone)
            if local.minute in minutes and local.hour in hours:
                found.add(instant)
            instant += timedelta(minutes=1)
    return sorted(found)


@pytest.mark.parametrize(
    ("zone", "around"),
    [
        (NY, utc(2024, 3, 10, 7)),
        (NY, utc(2024, 11, 3, 6)),
        (BERLIN, utc(2024, 3, 31, 1)),
        (BERLIN, utc(2024, 10, 27, 1)),
        (LORD_HOWE, utc(2024, 4, 6, 15)),
        (LORD_HOWE, utc(2024, 10, 5, 15)),
        (ZoneInfo("Australia/Sydney"), utc(2024, 4, 6, 16)),
        (ZoneInfo("Pacific/Apia"), utc(2011, 12, 30, 10)),  # skipped a whole day
        (ZoneInfo("UTC"), utc(2024, 6, 1)),
    ],
)
@pytest.mark.parametrize(
    ("expr", "minutes", "hours", "wall_clock"),
    [
        ("*/15 * * * *", {0, 15, 30, 45}, set(range(24)), False),
        ("0 * * * *", {0}, set(range(24)), False),
        ("*/20 1,2 * * *", {0, 20, 40}, {1, 2}, False),
        ("30 1,2 * * *", {30}, {1, 2}, True),
        ("0,30 2 * * *", {0, 30}, {2}, True),
        ("45 0-22 * * *", {45}, set(range(23)), True),
        ("0 12 * * *", {0}, {12}, True),
    ],
)
def test_matches_brute_force_around_transitions(
    zone: ZoneInfo,
    around: datetime,
    expr: str,
    minutes: set[int],
    hours: set[int],
    wall_clock: bool,
) -> None:
    start, end = around - timedelta(hours=30), around + timedelta(hours=30)
    expected = reference_fires(minutes, hours, zone, start, end, wall_clock=wall_clock)
    assert fires(expr, start, end, zone) == [f for f in expected if start < f <= end]
    # Starting from, or looking back from, every instant in between agrees with it.
    cron = CronExpression.parse(expr)
    probe = start
    while probe < end:
        successor = next(f for f in expected if f > probe)
        assert cron.next_after(probe, zone) == successor, probe
        latest = [f for f in expected if f <= probe][-1:]
        assert due_fires(cron, zone, utc(2000, 1, 1), probe, "coalesce") == latest, probe
        probe += timedelta(minutes=7)


@dataclass(frozen=True)
class Fields:
    minutes: set[int]
    hours: set[int] = field(default_factory=lambda: set(range(24)))
    doms: set[int] | None = None  # None: `*`
    months: set[int] = field(default_factory=lambda: set(range(1, 13)))
    dows: set[int] | None = None  # None: `*`; 0 = Sunday

    def matches(self, t: datetime) -> bool:
        dom = self.doms is None or t.day in self.doms
        dow = self.dows is None or t.isoweekday() % 7 in self.dows
        day = (dom or dow) if self.doms is not None and self.dows is not None else dom and dow
        return t.minute in self.minutes and t.hour in self.hours and t.month in self.months and day


@pytest.mark.parametrize("zone_name", ["America/New_York", "Europe/Paris", "Australia/Lord_Howe"])
@pytest.mark.parametrize(
    ("expr", "spec"),
    [
        ("0 * * * *", Fields({0})),
        ("*/30 9-17 * * MON-FRI", Fields({0, 30}, set(range(9, 18)), dows={1, 2, 3, 4, 5})),
        ("30 2 * * *", Fields({30}, {2})),
        ("15 1,2 * * *", Fields({15}, {1, 2})),
        ("0 0 13 * FRI", Fields({0}, {0}, doms={13}, dows={5})),
        ("5 3 1,15 */3 *", Fields({5}, {3}, doms={1, 15}, months={1, 4, 7, 10})),
    ],
)
def test_a_year_of_next_after_is_increasing_and_matches(
    zone_name: str, expr: str, spec: Fields
) -> None:
    zone = ZoneInfo(zone_name)
    cron = CronExpression.parse(expr)
    current, end = utc(2024, 1, 1), utc(2025, 1, 1)
    count = 0
    while True:
        nxt = cron.next_after(current, zone)
        if nxt > end:
            break
        assert nxt > current
        assert nxt.tzinfo is UTC
        local = wall(nxt, zone)
        if not spec.matches(local):  # must stand in for a local time skipped just before
            before = wall(nxt - timedelta(minutes=1), zone)
            skipped = [before + timedelta(minutes=m) for m in range(1, 180)]
            skipped = [t for t in skipped if t < local]
            assert skipped, nxt  # nxt is the first instant after a spring-forward gap
            assert any(spec.matches(t) for t in skipped), nxt
        current = nxt
        count += 1
    assert count > 0


# -- due_fires ---------------------------------------------------------------------------------


EVERY_MINUTE = CronExpression.parse("* * * * *")


def test_catch_up_returns_every_missed_fire_in_order() -> None:
    cursor = utc(2024, 1, 1, 12)
    now = utc(2024, 1, 1, 12, 10, 30)
    got = due_fires(EVERY_MINUTE, NY, cursor, now, "catch_up")
    assert got == [utc(2024, 1, 1, 12, m) for m in range(1, 11)]


def test_catch_up_respects_limit_and_continues_from_the_last_fire() -> None:
    cursor, now = utc(2024, 1, 1, 12), utc(2024, 1, 1, 12, 10)
    first = due_fires(EVERY_MINUTE, NY, cursor, now, "catch_up", limit=4)
    assert first == [utc(2024, 1, 1, 12, m) for m in range(1, 5)]
    rest = due_fires(EVERY_MINUTE, NY, first[-1], now, "catch_up", limit=100)
    assert first + rest == [utc(2024, 1, 1, 12, m) for m in range(1, 11)]


def test_coalesce_returns_only_the_latest_fire() -> None:
    cursor, now = utc(2024, 1, 1, 12), utc(2024, 1, 1, 12, 10, 30)
    assert due_fires(EVERY_MINUTE, NY, cursor, now, "coalesce") == [utc(2024, 1, 1, 12, 10)]
    exact = utc(2024, 1, 1, 12, 10)
    assert due_fires(EVERY_MINUTE, NY, cursor, exact, "coalesce") == [exact]


def test_coalesce_with_a_cursor_years_behind_an_every_second_schedule() -> None:
    cron = CronExpression.parse("* * * * * *")
    now = utc(2024, 5, 5, 5, 5, 5) + timedelta(microseconds=250_000)
    assert due_fires(cron, NY, utc(2014, 1, 1), now, "coalesce") == [utc(2024, 5, 5, 5, 5, 5)]


def test_coalesce_looks_back_across_a_fall_back() -> None:
    # now is 01:10 EST, in the repeated hour; the latest daily 01:30 fire was the EDT one.
    cron = CronExpression.parse("30 1 * * *")
    now = utc(2024, 11, 3, 6, 10)
    assert due_fires(cron, NY, utc(2024, 10, 1), now, "coalesce") == [utc(2024, 11, 3, 5, 30)]
    hourly = CronExpression.parse("30 * * * *")
    later = utc(2024, 11, 3, 6, 40)  # 01:40 EST: the second 01:30 already fired
    assert due_fires(hourly, NY, utc(2024, 10, 1), later, "coalesce") == [utc(2024, 11, 3, 6, 30)]


def test_coalesce_right_after_a_spring_forward_gap() -> None:
    cron = CronExpression.parse("30 2 * * *")
    cursor = utc(2024, 3, 9, 12)
    assert due_fires(cron, NY, cursor, utc(2024, 3, 10, 6, 59), "coalesce") == []
    at_jump = utc(2024, 3, 10, 7)  # 03:00 EDT: the missing 02:30 fires now
    assert due_fires(cron, NY, cursor, at_jump, "coalesce") == [at_jump]
    assert due_fires(cron, NY, cursor, utc(2024, 3, 10, 9), "coalesce") == [at_jump]


@pytest.mark.parametrize("policy", ["catch_up", "coalesce"])
def test_nothing_is_due_when_cursor_is_now_or_no_fire_passed(policy: str) -> None:
    now = utc(2024, 1, 1, 12, 0, 30)
    assert due_fires(EVERY_MINUTE, NY, now, now, policy) == []  # pyright: ignore[reportArgumentType]
    hourly = CronExpression.parse("0 * * * *")
    cursor = utc(2024, 1, 1, 12)
    assert due_fires(hourly, NY, cursor, utc(2024, 1, 1, 12, 59), policy) == []  # pyright: ignore[reportArgumentType]


def test_unknown_policy_is_rejected() -> None:
    with pytest.raises(ValidationError, match="policy"):
        due_fires(EVERY_MINUTE, NY, utc(2024, 1, 1), utc(2024, 1, 2), "skip")  # pyright: ignore[reportArgumentType]


def test_due_fires_rejects_naive_datetimes() -> None:
    naive = datetime(2024, 1, 1)
    checks: list[Callable[[], object]] = [
        lambda: due_fires(EVERY_MINUTE, NY, naive, utc(2024, 1, 2), "coalesce"),
        lambda: due_fires(EVERY_MINUTE, NY, utc(2024, 1, 1), naive, "coalesce"),
        lambda: due_fires(EVERY_MINUTE, NY, naive, utc(2024, 1, 2), "catch_up"),
    ]
    for check in checks:
        with pytest.raises(ValidationError, match="aware"):
            check()
