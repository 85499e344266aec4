"""Pure callback helpers: ids, timeouts, CEL compilation and resolution decisions."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from wai._job import JobRow
from wai.callbacks import (
    CallbackExpressions,
    CallbackTimeout,
    check_timeout,
    compile_expressions,
    decide_resolution,
    parse_callback_id,
    payload_json,
)
from wai.callbacks._ops import newest_first
from wai.callbacks._waiting import (
    WaitingCursor,
    decode_waiting_cursor,
    encode_waiting_cursor,
    timed_out_at,
)
from wai.errors import CallbackNotFound, SerializationError, ValidationError


def test_parse_callback_id_accepts_uuids_and_their_strings() -> None:
    cid = uuid.uuid4()
    assert parse_callback_id(cid) is cid
    assert parse_callback_id(str(cid)) == cid
    assert parse_callback_id(str(cid).upper()) == cid


@pytest.mark.parametrize("bad", ["", "nope", "1234", "x" * 101, "\x00", "' OR 1=1 --"])
def test_parse_callback_id_of_a_non_uuid_string_is_not_found(bad: str) -> None:
    with pytest.raises(CallbackNotFound, match="not a UUID"):
        parse_callback_id(bad)


@pytest.mark.parametrize("bad", [1, None, b"id", 1.5, ["x"], {"id": 1}])
def test_parse_callback_id_of_another_type_is_a_validation_error(bad: Any) -> None:
    with pytest.raises(ValidationError, match="callback id"):
        parse_callback_id(bad)


@pytest.mark.parametrize("good", [0.001, 1, 3600, 86400.5])
def test_check_timeout_accepts_positive_seconds(good: float) -> None:
    assert check_timeout(good) == float(good)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "10", None, 1e12])
def test_check_timeout_rejects_the_rest(bad: Any) -> None:
    with pytest.raises(ValidationError, match="timeout"):
        check_timeout(bad)


def test_payload_json_keeps_none_only_when_asked() -> None:
    assert payload_json(None, keep_none=False) is None
    assert payload_json(None, keep_none=True) == "null"
    assert payload_json({"a": [1, "é"]}, keep_none=False) == '{"a":[1,"é"]}'
    with pytest.raises(SerializationError):
        payload_json({1, 2}, keep_none=False)


def test_macro_variables_are_allowed_in_expressions() -> None:
    exprs = compile_expressions(
        filter="payload.items.all(i, i.qty > 0)",
        transform="payload.items.map(i, i.sku)",
    )
    decision = decide_resolution(
        exprs, {"items": [{"qty": 1, "sku": "a"}, {"qty": 2, "sku": "b"}]}, "complete"
    )
    assert (decision.action, decision.payload) == ("complete", ["a", "b"])


def test_on_fail_wins_over_on_complete() -> None:
    exprs = compile_expressions(on_complete="true", on_fail="payload.bad")
    assert decide_resolution(exprs, {"bad": True}, "ignore").action == "fail"
    assert decide_resolution(exprs, {"bad": False}, "ignore").action == "complete"


def test_a_filter_error_lets_the_payload_through() -> None:
    exprs = compile_expressions(filter="payload.missing == 1", on_complete="true")
    assert decide_resolution(exprs, {}, "ignore").action == "complete"


def test_a_non_boolean_condition_does_not_match() -> None:
    exprs = compile_expressions(on_complete="payload.amount")
    assert decide_resolution(exprs, {"amount": 3}, "ignore").action == "ignore"


def test_no_expressions_means_the_default_action() -> None:
    none = CallbackExpressions()
    assert decide_resolution(none, {"a": 1}, "complete").payload == {"a": 1}
    assert decide_resolution(none, {"a": 1}, "fail").action == "fail"
    assert decide_resolution(none, {"a": 1}, "ignore").action == "ignore"
    with pytest.raises(ValidationError, match="default_action"):
        decide_resolution(none, {}, "maybe")


@pytest.mark.parametrize(
    ("transform", "problem"),
    [('"nul \\x00"', "NUL byte"), ('{"k": ["\\ud800"]}', "lone surrogate")],
)
def test_a_transform_that_builds_unstorable_text_resolves_nothing(
    transform: str, problem: str
) -> None:
    # the expression text is clean; the CEL string literal it holds spells the character
    exprs = compile_expressions(transform=transform)
    with pytest.raises(
        ValidationError, match=f"^callback transform result.*: contains a {problem}"
    ):
        decide_resolution(exprs, {}, "complete")


# -- what operators see: waiting jobs' cursors, timeout times and order ------------------


def test_a_waiting_cursor_round_trips() -> None:
    at = datetime(2026, 5, 1, 12, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    cursor = encode_waiting_cursor(at, 42)
    assert cursor == "2026-05-01T12:00:00.123456+02:00/42"
    assert decode_waiting_cursor(cursor) == WaitingCursor(at, 42)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "nope",
        "2026-05-01T12:00:00+00:00",
        "2026-05-01T12:00:00/1",  # no offset: ambiguous
        "2026-05-01T12:00:00+00:00/abc",
        "2026-05-01T12:00:00+00:00/-1",
        "2026-05-01T12:00:00+00:00/١٢",  # digits, not ASCII ones
        "2026-05-01T12:00:00+00:00/99999999999999999999",
        "x" * 101,
        None,
        12,
    ],
)
def test_a_waiting_cursor_wai_did_not_make_is_refused(bad: object) -> None:
    with pytest.raises(ValidationError, match="invalid waiting-job cursor"):
        decode_waiting_cursor(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-05-01T12:00:00.5+00:00", datetime(2026, 5, 1, 12, 0, 0, 500000, tzinfo=UTC)),
        ("2026-05-01T12:00:00", None),  # naive: not a time wai wrote
        ("yesterday", None),
        (None, None),
        (12, None),
        ("9" * 100, None),
    ],
)
def test_timed_out_at_reads_an_error_entry_time_or_gives_none(
    text: object, expected: datetime | None
) -> None:
    assert timed_out_at(text) == expected


def _timeout(job_id: int, at: datetime | None) -> CallbackTimeout:
    now = datetime(2026, 5, 1, tzinfo=UTC)
    row = JobRow.from_record(
        {
            "id": job_id,
            "kind": "k",
            "queue": "q",
            "args": {},
            "state": "failed",
            "priority": 2,
            "attempt": 1,
            "max_attempts": 1,
            "run_at": now,
            "attempted_at": now,
            "heartbeat_at": None,
            "deadline_at": None,
            "finalized_at": now,
            "created_at": now,
            "errors": [],
            "metadata": {},
            "tags": [],
            "run_lease": 1,
        }
    )
    return CallbackTimeout(job=row, timed_out_at=at, dead_lettered=False)


def test_callback_timeouts_come_newest_first_and_unknown_times_last() -> None:
    t0 = datetime(2026, 5, 1, tzinfo=UTC)
    found = [
        _timeout(1, t0),
        _timeout(2, None),
        _timeout(3, t0 + timedelta(minutes=5)),
        _timeout(4, None),
        _timeout(5, t0),
    ]
    assert [t.job.id for t in newest_first(found)] == [3, 5, 1, 4, 2]
