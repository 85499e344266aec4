"""The args codec: typed dataclass fields encode to JSON and decode back to their types."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Literal

import msgspec
import pydantic
import pytest

import wai
from tests.rich_args import Color, Level, Mode, Profile, Rich, sample
from wai._codec import check_decodable, decode_args, dumps, encode_args
from wai._registry import Registry
from wai.errors import SerializationError, ValidationError


def roundtrip(args: Any) -> Any:
    return decode_args(type(args), json.loads(encode_args(args)))


def test_every_supported_field_type_comes_back_as_itself() -> None:
    args = sample()
    back = roundtrip(args)
    assert back == args
    assert type(back.at) is datetime
    assert back.at.utcoffset() == timedelta(hours=2)
    assert back.at.microsecond == 123456
    assert type(back.naive) is datetime
    assert back.naive.tzinfo is None
    assert type(back.day) is date
    assert type(back.clock) is time
    assert type(back.token) is uuid.UUID
    assert type(back.amount) is Decimal
    assert str(back.amount) == "12345678901234567890.000000001"
    assert back.color is Color.BLUE
    assert back.level is Level.HIGH
    assert back.mode is Mode.SAFE
    assert type(back.profile) is Profile
    assert type(back.profile.birthday) is date
    assert [type(p) for p in back.history] == [Profile]
    assert type(back.pair) is tuple
    assert type(back.scores) is tuple
    assert type(back.by_name["home"]) is Profile
    assert back.by_name["home"].created.tzinfo is None


def test_typed_values_are_stored_as_plain_json() -> None:
    data = json.loads(encode_args(sample()))
    assert data["at"] == "2024-05-01T12:30:15.123456+02:00"
    assert data["naive"] == "2024-05-01T12:30:00"
    assert data["day"] == "2024-02-29"
    assert data["token"] == "12345678-1234-5678-1234-567812345678"
    assert data["amount"] == "12345678901234567890.000000001"  # exact, as a string
    assert (data["color"], data["level"], data["mode"]) == ("blue", 2, "safe")  # by value
    assert data["profile"] == {"created": "2020-01-01T00:00:00Z", "birthday": "1990-07-04"}
    assert data["pair"] == [3, "x"]
    assert data["note"] is None
    assert data["plan"] == "pro"


def test_optional_fields_come_back_set_or_none() -> None:
    args = replace(sample(), note="hi", parent=3)
    assert roundtrip(args) == args
    assert roundtrip(replace(args, note=None)).note is None


@dataclass
class Flat:
    a: int
    b: str


def test_flat_dataclasses_still_take_the_fast_encoder() -> None:
    assert encode_args(Flat(1, "x")) == '{"a":1,"b":"x"}'
    assert roundtrip(Flat(1, "x")) == Flat(1, "x")


# -- encoding errors name the field ---------------------------------------------------


class Opaque:
    """A value no codec knows."""


@dataclass
class Holder:
    profile: Any
    items: list[Any]
    by_key: dict[str, Any]


@pytest.mark.parametrize(
    ("args", "path"),
    [
        (Holder(profile=Profile(created=Opaque()), items=[], by_key={}), "Holder.profile.created"),  # pyright: ignore[reportArgumentType]
        (Holder(profile=None, items=[1, Opaque()], by_key={}), "Holder.items[1]"),
        (Holder(profile=None, items=[], by_key={"k": [Opaque()]}), "Holder.by_key['k'][0]"),
    ],
)
def test_an_unencodable_field_is_named_by_its_path(args: Holder, path: str) -> None:
    with pytest.raises(SerializationError) as info:
        encode_args(args)
    assert str(info.value) == f"{path}: cannot encode object of type Opaque"


def test_an_unencodable_value_in_dict_args_is_named_by_its_path() -> None:
    with pytest.raises(SerializationError) as info:
        encode_args({"user": {"at": datetime(2024, 1, 1)}})
    message = str(info.value)
    assert message.startswith("args['user']['at']: cannot encode object of type datetime")
    assert "dict args hold JSON values only" in message


def test_an_unencodable_metadata_value_is_named_by_its_path() -> None:
    with pytest.raises(
        SerializationError, match=r"^metadata\['b'\]: cannot encode object of type bytes$"
    ):
        dumps({"a": 1, "b": b"x"}, "metadata")


def test_nan_in_a_nested_field_is_refused() -> None:
    with pytest.raises(SerializationError, match="Out of range float"):
        encode_args(Holder(profile=None, items=[float("nan")], by_key={}))


# -- decoding errors name the field ---------------------------------------------------


def _stored(**changes: Any) -> dict[str, Any]:
    data = json.loads(encode_args(sample()))
    data.update(changes)
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_stored(profile={"created": 5}), "Rich.profile.created: expected `datetime`, got `int`"),
        (_stored(history=[{"created": "soon"}]), "Rich.history[0].created: invalid RFC3339"),
        (_stored(color="green"), "Rich.color: invalid enum value 'green'"),
        (_stored(plan="gold"), "Rich.plan: invalid enum value 'gold'"),
        (_stored(amount="lots"), "Rich.amount: invalid decimal string"),
        (_stored(pair=[1, 2]), "Rich.pair[1]: expected `str`, got `int`"),
        ({"user_id": 1}, "Rich: object missing required field `at`"),
        ([1, 2], "Rich: expected `object`, got `array`"),
    ],
)
def test_args_that_do_not_fit_the_type_name_the_field(data: Any, message: str) -> None:
    with pytest.raises(SerializationError) as info:
        decode_args(Rich, data)
    assert str(info.value).startswith(message)


def test_a_failing_post_init_is_a_serialization_error() -> None:
    @dataclass
    class Positive:
        n: int

        def __post_init__(self) -> None:
            if self.n <= 0:
                raise ValueError("n must be positive")

    assert decode_args(Positive, {"n": 1}) == Positive(1)
    with pytest.raises(SerializationError, match="n must be positive"):
        decode_args(Positive, {"n": 0})


def test_extra_stored_fields_are_ignored() -> None:
    # A field removed from the type leaves old rows decodable.
    assert decode_args(Flat, {"a": 1, "b": "x", "gone": True}) == Flat(1, "x")


@dataclass
class Dangling:
    ref: Missing  # type: ignore[name-defined]  # noqa: F821 - never defined, on purpose


def test_a_type_whose_hints_do_not_resolve_is_refused_at_registration() -> None:
    with pytest.raises(ValidationError, match="Dangling cannot be decoded from its type hints"):
        check_decodable(Dangling)
    with pytest.raises(ValidationError, match="Dangling cannot be decoded"):
        Registry().add_task(Dangling, lambda job: None)
    with pytest.raises(SerializationError, match="Dangling"):
        decode_args(Dangling, {"ref": 1})


# -- the other args types keep their own codecs -----------------------------------------


class Model(pydantic.BaseModel):
    at: datetime
    amount: Decimal
    plan: Literal["free", "pro"]


class Struct(msgspec.Struct):
    at: datetime
    token: uuid.UUID
    profile: Profile


def test_pydantic_and_msgspec_args_round_trip() -> None:
    model = Model(at=datetime(2024, 1, 1, tzinfo=None), amount=Decimal("1.10"), plan="pro")
    assert roundtrip(model) == model
    struct = Struct(
        at=datetime(2024, 1, 1), token=uuid.uuid4(), profile=Profile(created=datetime(2020, 1, 1))
    )
    assert roundtrip(struct) == struct


def test_msgspec_struct_decode_errors_name_the_field() -> None:
    data = json.loads(
        encode_args(
            Struct(
                at=datetime(2024, 1, 1), token=uuid.uuid4(), profile=Profile(datetime(2020, 1, 1))
            )
        )
    )
    data["profile"]["created"] = []
    with pytest.raises(SerializationError, match=r"^Struct\.profile\.created: expected `datetime`"):
        decode_args(Struct, data)


def test_decode_errors_are_wai_errors() -> None:
    with pytest.raises(wai.SerializationError):
        decode_args(Rich, {})
