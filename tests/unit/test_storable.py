"""What PostgreSQL can store: caller input refused (_storable), wai's own text escaped (_text).

The PostgreSQL side of the same properties (what passes these checks round-trips through
``text`` and ``jsonb``) is in tests/integration/test_storable.py.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.factories import SendEmail
from wai._kinds import dumps, encode_args
from wai._outcomes import decide, describe_exception
from wai._queues import QueueConfig
from wai._registry import Registry
from wai._results import Cancel, RetryAfter, Snooze
from wai._seconds import MAX_SECONDS, check_seconds
from wai._storable import check_json, check_text
from wai._text import storable
from wai.errors import FollowUpError, ValidationError
from wai.worker import RuntimeSettings

#: Any text, NUL bytes and lone surrogates (category Cs) included, and drawn often.
TEXT = st.text(
    alphabet=st.characters(exclude_categories=())
    | st.sampled_from(["\x00", "\ud800", "\udfff", "\\", "u", "0"]),
    max_size=12,
)

#: JSON-like values built from TEXT: what args, metadata and payloads hold.
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | TEXT,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(TEXT, inner, max_size=4)
    ),
    max_leaves=12,
)


def storable_text(text: str) -> bool:
    """The definition: no NUL, and valid UTF-8."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- check_text ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "plain", "ünïcødé \U0001f680", "\\x00", "\\u0000", "\n\t"])
def test_check_text_accepts_storable_text(text: str) -> None:
    check_text(text, "field")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a\x00b", "tag: contains a NUL byte, which PostgreSQL cannot store"),
        ("\x00", "tag: contains a NUL byte, which PostgreSQL cannot store"),
        ("x\ud800", "tag: contains a lone surrogate '\\ud800', which is not valid UTF-8"),
        ("\udfff", "tag: contains a lone surrogate '\\udfff', which is not valid UTF-8"),
    ],
)
def test_check_text_names_the_field_and_the_problem(text: str, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        check_text(text, "tag")
    assert str(info.value) == message


@pytest.mark.parametrize("value", [None, 1, b"bytes", ["x"]])
def test_check_text_refuses_what_is_not_a_string(value: Any) -> None:
    with pytest.raises(ValidationError, match=r"^reason: must be a string"):
        check_text(value, "reason")


@given(TEXT)
def test_check_text_refuses_exactly_the_unstorable(text: str) -> None:
    if storable_text(text):
        check_text(text, "f")
    else:
        with pytest.raises(ValidationError, match=r"^f: contains a"):
            check_text(text, "f")


# -- check_json ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ("\x00", "args"),
        ({"name": ["a", "b", "c\x00"]}, "args['name'][2]"),
        ({"a": {"b": ("ok", {"c": "\ud800"})}}, "args['a']['b'][1]['c']"),
        ({"k\x00": 1}, "args key 'k\\x00'"),
        ({"outer": {"\udc00": None}}, "args['outer'] key '\\udc00'"),
        ([1, 2.5, None, True, "\x00"], "args[4]"),
    ],
)
def test_check_json_names_the_path(value: object, path: str) -> None:
    with pytest.raises(ValidationError) as info:
        check_json(value, "args")
    assert str(info.value).startswith(f"{path}: contains a ")


@pytest.mark.parametrize(
    "value", [None, 1, 1.5, True, "", "\\u0000", {"a": [1, {"b": "ü"}]}, {1: "int key"}, ()]
)
def test_check_json_accepts_storable_values(value: object) -> None:
    check_json(value, "args")


def walk_error(value: object, field: str) -> str | None:
    """The message check_json raises for ``value``, or None when it passes."""
    try:
        check_json(value, field)
    except ValidationError as exc:
        return str(exc)
    return None


def orjson_refuses(value: object) -> bool:
    """Whether orjson refuses ``value`` (a lone surrogate) or writes a NUL escape."""
    try:
        text = orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return True
    return "\\u0000" in text.replace("\\\\", "")  # an escaped backslash is no escape


@given(JSONISH)
def test_check_json_refuses_exactly_what_orjson_cannot_encode_for_jsonb(value: Any) -> None:
    assert (walk_error(value, "v") is not None) == orjson_refuses(value)


@given(st.dictionaries(TEXT, JSONISH, max_size=4))
def test_encode_args_refuses_exactly_what_check_json_refuses(args: dict[str, Any]) -> None:
    """The fast path (checking the encoded text) agrees with the walk, message included."""
    expected = walk_error(args, "args")
    if expected is None:
        assert orjson.loads(encode_args(args)) == orjson.loads(orjson.dumps(args))
        return
    with pytest.raises(ValidationError) as info:
        encode_args(args)
    assert str(info.value) == expected


@given(TEXT, TEXT)
def test_flat_dataclass_args_refuse_what_check_json_refuses(to: str, subject: str) -> None:
    """The same for orjson's path of flat dataclass args."""
    data = {"to": to, "subject": subject}
    expected = walk_error(data, "args")
    if expected is None:
        assert orjson.loads(encode_args(SendEmail(to=to, subject=subject))) == data
        return
    with pytest.raises(ValidationError) as info:
        encode_args(SendEmail(to=to, subject=subject))
    assert str(info.value) == expected


def test_dumps_names_the_field_it_was_given() -> None:
    with pytest.raises(ValidationError, match=r"^metadata\['note'\]: contains a NUL byte"):
        dumps({"note": "a\x00"}, "metadata")


# -- storable -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\x00b", "a\\x00b"),
        ("\x00\x00", "\\x00\\x00"),
        ("lone \ud800 here", "lone \\ud800 here"),
        ("\udfff", "\\udfff"),
        ("nul \x00 and \ud83d", "nul \\x00 and \\ud83d"),
        ("ünï \U0001f680 \ud800", "ünï \U0001f680 \\ud800"),
    ],
)
def test_storable_escapes_nul_and_lone_surrogates(text: str, expected: str) -> None:
    assert storable(text) == expected


@pytest.mark.parametrize("text", ["", "plain", "ünï \U0001f680", "\\x00 already escaped"])
def test_storable_returns_storable_text_itself(text: str) -> None:
    assert storable(text) is text


@given(TEXT)
def test_storable_always_gives_storable_text_and_keeps_what_was(text: str) -> None:
    out = storable(text)
    check_text(out, "out")
    assert (out == text) == storable_text(text)


# -- wai's own text -----------------------------------------------------------------------


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_describe_exception_escapes_what_the_message_holds() -> None:
    text = describe_exception(raised(ValueError("bad \x00 and \ud800 here")))
    assert text.startswith("ValueError: bad \\x00 and \\ud800 here")
    check_text(text, "error")


def test_describe_exception_escapes_a_followup_error() -> None:
    text = describe_exception(FollowUpError("spec 'x' raised KeyError: '\x00\udc80'"))
    assert text == "FollowUpError: spec 'x' raised KeyError: '\\x00\\udc80'"


def test_an_exception_with_unstorable_text_becomes_a_storable_outcome() -> None:
    out = decide(
        job_id=1, run_lease=1, attempt=1, max_attempts=3, exc=raised(KeyError("\x00\ud800"))
    )
    assert out.error is not None
    check_text(out.error, "error")
    assert out.error.startswith("KeyError: '\\x00\\ud800'")


@pytest.mark.parametrize("reason", ["a\x00b", "\ud800", 5, None])
def test_cancel_refuses_an_unstorable_reason_when_built(reason: Any) -> None:
    with pytest.raises(ValidationError, match=r"^Cancel\(reason\): "):
        Cancel(reason)


def test_a_cancel_reason_changed_after_it_was_built_is_escaped() -> None:
    cancel = Cancel("ok")
    object.__setattr__(cancel, "reason", "bad \x00")
    out = decide(job_id=1, run_lease=1, attempt=1, max_attempts=3, result=cancel)
    assert out.reason == "bad \\x00"
    assert out.error == "cancelled: bad \\x00"


# -- durations ----------------------------------------------------------------------------

BAD_SECONDS = [math.inf, -math.inf, math.nan, 1e300, MAX_SECONDS + 1, -1, -0.5, True, "5", None]


@pytest.mark.parametrize("seconds", BAD_SECONDS)
@pytest.mark.parametrize("result", [RetryAfter, Snooze])
def test_retry_after_and_snooze_refuse_unstorable_delays(result: type[Any], seconds: Any) -> None:
    with pytest.raises(ValidationError, match=rf"^{result.__name__}\(seconds\) must be"):
        result(seconds)


@pytest.mark.parametrize("seconds", [0, 0.0, 0.001, 5, 3600.5, MAX_SECONDS])
def test_retry_after_and_snooze_take_delays_up_to_a_hundred_years(seconds: float) -> None:
    assert RetryAfter(seconds).seconds == seconds
    assert Snooze(seconds).seconds == seconds


@pytest.mark.parametrize("value", [*BAD_SECONDS, 0])
def test_check_seconds_refuses_what_an_interval_cannot_hold(value: Any) -> None:
    with pytest.raises(ValidationError, match=r"^deadline must be a number of seconds"):
        check_seconds(value, "deadline")


@pytest.mark.parametrize("deadline", [math.inf, math.nan, 0, -1, 1e300, True])
def test_task_and_queue_deadlines_must_be_storable(deadline: Any) -> None:
    with pytest.raises(ValidationError, match="deadline"):
        Registry().add_task("k", lambda job: None, deadline=deadline)
    with pytest.raises(ValidationError, match="deadline"):
        QueueConfig(deadline=deadline)


@pytest.mark.parametrize(
    "option", ["retention", "priority_aging", "dlq_retention", "claim_batch_size"]
)
@pytest.mark.parametrize("value", [math.inf, math.nan, True, -1, 1e300])
def test_queue_config_numbers_are_checked(option: str, value: Any) -> None:
    with pytest.raises(ValidationError, match=option):
        QueueConfig(**{option: value})


@pytest.mark.parametrize("option", ["poll_interval", "heartbeat_staleness", "rescue_interval"])
@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_runtime_intervals_must_be_finite(option: str, value: float) -> None:
    options: dict[str, Any] = {option: value}
    with pytest.raises(ValidationError, match=option):
        RuntimeSettings(**options)


def test_a_spec_name_must_be_storable() -> None:
    with pytest.raises(ValidationError, match=r"^spec name: contains a NUL byte"):
        Registry().add_spec(
            "k", "completed", lambda args, job: None, with_request=False, name="\x00"
        )
