from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, ClassVar

import msgspec
import pydantic
import pytest

from tests.factories import HOSTILE, ChargeCard, Counter, HTMLToPDF, ResizeImage, SendEmail
from wai._inserts import validate_queue
from wai._kinds import decode_args, dumps, encode_args, kind_of, kind_of_type, snake_case
from wai.errors import SerializationError, ValidationError


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("SendEmail", "send_email"),
        ("HTMLToPDF", "html_to_pdf"),
        ("SMTPEmail", "smtp_email"),
        ("OAuthRefresh", "o_auth_refresh"),
        ("ProcessV2Import", "process_v2_import"),
        ("IOError", "io_error"),
        ("Signup", "signup"),
        ("getHTTPResponse", "get_http_response"),
        ("S3Upload", "s3_upload"),
        ("ABC", "abc"),
        ("already_snake", "already_snake"),
    ],
)
def test_snake_case_golden(name: str, expected: str) -> None:
    assert snake_case(name) == expected


def test_kind_of_instance_and_class_use_the_class_name() -> None:
    assert kind_of(SendEmail(to="a@b.c")) == "send_email"
    assert kind_of(HTMLToPDF) == "html_to_pdf"
    assert kind_of(ChargeCard(card_id="c", cents=1)) == "charge_card"
    assert kind_of(ResizeImage(path="p", width=1)) == "resize_image"


def test_kind_of_explicit_kind_wins() -> None:
    assert kind_of(SendEmail(to="x"), "mail.v2:send-now") == "mail.v2:send-now"


def test_kind_of_dict_without_kind_is_rejected() -> None:
    with pytest.raises(ValidationError, match="explicit kind"):
        kind_of({"to": "x"})
    assert kind_of({"to": "x"}, "send") == "send"


@pytest.mark.parametrize(
    "bad", ["", "a b", "x" * 201, HOSTILE, "tab\tkind", "naïve", "kind\n", "x" * 200 + "\n"]
)
def test_kind_of_invalid_explicit_kind_is_rejected(bad: str) -> None:
    with pytest.raises(ValidationError, match="invalid job kind"):
        kind_of({"a": 1}, bad)


def test_kind_of_type_accepts_a_kind_string() -> None:
    assert kind_of_type("custom_kind") == "custom_kind"
    assert kind_of_type(SendEmail) == "send_email"
    with pytest.raises(ValidationError):
        kind_of_type("no spaces allowed")


# -- encoding ------------------------------------------------------------------------


def test_encode_dataclass_roundtrip() -> None:
    args = SendEmail(to="ü@example.com", subject="héllo")
    text = encode_args(args)
    assert json.loads(text) == {"to": "ü@example.com", "subject": "héllo"}
    assert "ü" in text  # stored as UTF-8, not \u escapes
    assert decode_args(SendEmail, json.loads(text)) == args


@dataclass
class _Inner:
    x: int


class _Color(enum.IntEnum):
    RED = 1


@dataclass
class _Outer:
    name: str
    inner: _Inner
    items: list[int] = field(default_factory=lambda: [1, 2])
    pair: tuple[int, int] = (3, 4)
    color: _Color = _Color.RED
    limit: ClassVar[int] = 9


@dataclass(frozen=True, slots=True)
class _Flat:
    a: str
    b: int
    c: float
    d: bool
    e: None = None


@pytest.mark.parametrize(
    "args", [_Flat("x", 1, 0.5, True), _Outer("o", _Inner(7)), SendEmail(to="a"), _Inner(x=1)]
)
def test_encode_dataclass_equals_asdict(args: object) -> None:
    # Flat dataclasses go to orjson directly, the rest through msgspec: the JSON that
    # asdict gave before, so rows stored by either read alike.
    expected = json.dumps(dataclasses.asdict(args), separators=(",", ":"), ensure_ascii=False)  # pyright: ignore[reportArgumentType]
    assert encode_args(args) == expected
    assert encode_args(args) == expected  # the field names are cached per class


@dataclass(frozen=True, slots=True)
class _Scalar:
    v: object


@pytest.mark.parametrize(
    "value",
    [
        0.1,
        -0.0,
        1e16,
        1.5e-7,
        2**63 - 1,
        -(2**63),
        2**64 - 1,
        2**70,  # beyond orjson's integers: the stdlib path, exact
        -(2**70),
        "ü\U0001f680\u2028\x7f",
        'tab\tquote"back\\slash\u001f',
        "\\u0000",  # the six characters, not a NUL byte
        True,
        None,
    ],
)
def test_flat_args_encode_to_the_same_values_as_the_stdlib(value: object) -> None:
    text = encode_args(_Scalar(value))
    assert json.loads(text) == {"v": value}
    stdlib = json.dumps({"v": value}, separators=(",", ":"), ensure_ascii=False)
    assert json.loads(text) == json.loads(stdlib)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        (math.nan, SerializationError),
        (math.inf, SerializationError),
        (-math.inf, SerializationError),
        ("\ud800", ValidationError),
        ("nul\x00", ValidationError),
    ],
)
def test_flat_args_that_json_cannot_hold_are_rejected_not_nulled(
    value: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        encode_args(_Scalar(value))


def test_encode_dataclass_that_is_a_mapping_uses_its_items() -> None:
    @dataclass
    class Both(Mapping[str, int]):
        hidden: int = 1

        def __getitem__(self, key: str) -> int:
            return {"shown": 2}[key]

        def __iter__(self) -> Iterator[str]:
            return iter(["shown"])

        def __len__(self) -> int:
            return 1

    assert encode_args(Both()) == '{"shown":2}'


def test_kind_and_queue_checks_are_remembered_only_when_valid() -> None:
    for _ in range(2):
        with pytest.raises(ValidationError, match="invalid job kind"):
            kind_of({"a": 1}, "not valid")
        with pytest.raises(ValidationError, match="invalid queue name"):
            validate_queue("not valid")
        with pytest.raises(ValidationError, match="invalid queue name"):
            validate_queue("q\n")  # `$` alone would let a trailing newline through
        assert kind_of({"a": 1}, "ok.kind") == "ok.kind"
        assert validate_queue("ok-queue") == "ok-queue"
    for bad in (None, 7, ["a"]):
        with pytest.raises(ValidationError):
            kind_of({"a": 1}, bad)  # pyright: ignore[reportArgumentType]
        with pytest.raises(ValidationError):
            validate_queue(bad)  # pyright: ignore[reportArgumentType]


def test_encode_pydantic_roundtrip() -> None:
    class Scheduled(pydantic.BaseModel):
        at: datetime
        amount: Decimal

    args = Scheduled(at=datetime(2024, 5, 1, 12, tzinfo=UTC), amount=Decimal("1.50"))
    data = json.loads(encode_args(args))
    assert data["at"].startswith("2024-05-01T12:00:00")
    assert decode_args(Scheduled, data) == args


def test_encode_msgspec_roundtrip() -> None:
    class Stamp(msgspec.Struct):
        at: datetime
        tags: list[str]

    args = Stamp(at=datetime(2024, 5, 1, tzinfo=UTC), tags=["a", "b"])
    data = json.loads(encode_args(args))
    assert data["tags"] == ["a", "b"]
    assert decode_args(Stamp, data) == args
    assert decode_args(ResizeImage, {"path": "p", "width": 3}) == ResizeImage(path="p", width=3)


def test_encode_dict_roundtrip() -> None:
    args: dict[str, Any] = {"n": 1, "nested": {"list": [1, 2.5, None, True, "s"]}}
    assert json.loads(encode_args(args)) == args
    assert decode_args(None, args) is args
    assert decode_args(dict, args) is args


def test_encode_is_compact_json() -> None:
    assert encode_args(Counter(n=1)) == '{"n":1}'


def test_literal_backslash_u0000_text_is_not_a_nul_byte() -> None:
    # Six characters, not a NUL: must be accepted (no false positive of the NUL check).
    args = {"s": "\\u0000"}
    assert json.loads(encode_args(args)) == args


@pytest.mark.parametrize(
    "args",
    [
        {"s": "a\x00b"},
        {"nested": {"deep": ["ok", "bad\x00"]}},
        {"key\x00": 1},
        SendEmail(to="nul\x00@example.com"),
    ],
)
def test_encode_rejects_nul_bytes(args: object) -> None:
    with pytest.raises(ValidationError, match="NUL"):
        encode_args(args)


@pytest.mark.parametrize(
    "args",
    [
        {"x": math.nan},
        {"x": math.inf},
        {"x": {1, 2}},
        {"x": datetime(2024, 1, 1, tzinfo=UTC)},
        {"x": b"bytes"},
        {"x": Decimal("1.5")},
        {"x": object()},
        {1: "int key"},
        {("tuple", "key"): 1},
    ],
)
def test_encode_rejects_non_json(args: dict[Any, Any]) -> None:
    with pytest.raises(SerializationError):
        encode_args(args)


@pytest.mark.parametrize(
    ("args", "path"),
    [
        ({"s": "\ud800"}, "args['s']"),
        ({"k\udfff": 1}, "args key 'k\\udfff'"),
        ({"l": ["ok", "\udc80"]}, "args['l'][1]"),
        (SendEmail(to="\udc80"), "args['to']"),
    ],
)
def test_encode_rejects_lone_surrogates_naming_the_path(args: object, path: str) -> None:
    # Valid Python str, but not UTF-8: PostgreSQL could never store it.
    with pytest.raises(ValidationError) as info:
        encode_args(args)
    assert str(info.value).startswith(f"{path}: contains a lone surrogate")


@pytest.mark.parametrize(
    ("args", "path"),
    [
        ({"s": "a\x00b"}, "args['s']"),
        ({"nested": {"deep": ["ok", "bad\x00"]}}, "args['nested']['deep'][1]"),
        ({"key\x00": 1}, "args key 'key\\x00'"),
        (SendEmail(to="nul\x00@example.com"), "args['to']"),
    ],
)
def test_encode_names_the_path_of_a_nul_byte(args: object, path: str) -> None:
    with pytest.raises(ValidationError) as info:
        encode_args(args)
    assert str(info.value) == f"{path}: contains a NUL byte, which PostgreSQL cannot store"


def test_encode_accepts_astral_characters() -> None:
    args = {"emoji": "\U0001f680", "cjk": "\u6f22\u5b57"}
    assert json.loads(encode_args(args)) == args


@pytest.mark.parametrize("args", [[1, 2], "text", 42, None, object()])
def test_encode_rejects_unsupported_args_types(args: object) -> None:
    with pytest.raises(SerializationError, match="cannot use"):
        encode_args(args)


def test_dumps_names_what_failed() -> None:
    with pytest.raises(
        SerializationError, match=r"^metadata\['x'\]: cannot encode object of type set"
    ):
        dumps({"x": {1}}, "metadata")
    with pytest.raises(
        SerializationError, match=r"^metadata cannot be encoded as JSON: Out of range"
    ):
        dumps({"x": math.nan}, "metadata")


def test_serialization_error_is_a_validation_error() -> None:
    assert issubclass(SerializationError, ValidationError)
    assert issubclass(ValidationError, ValueError)


# -- decoding ------------------------------------------------------------------------


def test_decode_dataclass_with_wrong_fields_fails_clearly() -> None:
    with pytest.raises(SerializationError, match=r"^SendEmail: object missing required field `to`"):
        decode_args(SendEmail, {"recipient": "x"})


def test_decode_pydantic_validation_failure() -> None:
    with pytest.raises(SerializationError, match="ChargeCard"):
        decode_args(ChargeCard, {"card_id": "c", "cents": "not a number"})


def test_decode_msgspec_type_mismatch() -> None:
    with pytest.raises(SerializationError, match="ResizeImage"):
        decode_args(ResizeImage, {"path": "p", "width": "wide"})


def test_decode_plain_class_uses_keywords() -> None:
    @dataclass(frozen=True)
    class Plain:
        a: int

    assert decode_args(Plain, {"a": 1}) == Plain(a=1)
