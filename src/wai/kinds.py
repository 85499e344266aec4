"""Job kinds and args: naming, encoding to JSON and decoding back (pure, no I/O)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Mapping
from typing import Any, cast

import orjson

from wai._storable import check_json
from wai.errors import SerializationError, ValidationError

__all__ = ["decode_args", "dumps", "encode_args", "kind_of", "snake_case", "validate_kind"]

_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD = re.compile(r"([a-z0-9])([A-Z])")
_KIND = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")


def snake_case(name: str) -> str:
    """``SendEmail`` → ``send_email``, ``HTMLToPDF`` → ``html_to_pdf``."""
    return _WORD.sub(r"\1_\2", _ACRONYM.sub(r"\1_\2", name)).lower()


# Valid names are remembered, so that a batch of jobs of one kind checks it once. Invalid
# ones raise, and lru_cache caches no exception.
@functools.lru_cache(maxsize=4096)
def _valid_kind(kind: str) -> str:
    if not _KIND.match(kind):
        raise ValidationError(
            f"invalid job kind {kind!r}: use 1-200 letters, digits, '_', '.', ':' or '-'"
        )
    return kind


@functools.lru_cache(maxsize=4096)
def _kind_of_class_name(name: str) -> str:
    return _valid_kind(snake_case(name))


def validate_kind(kind: str) -> str:
    """Return ``kind`` if it is a usable job kind, else raise ValidationError."""
    if not isinstance(kind, str):
        raise ValidationError(
            f"invalid job kind {kind!r}: use 1-200 letters, digits, '_', '.', ':' or '-'"
        )
    return _valid_kind(kind)


def kind_of(args: object, kind: str | None = None) -> str:
    """The kind of a job: explicit ``kind``, else the args class name in snake_case."""
    if kind is not None:
        return validate_kind(kind)
    if isinstance(args, Mapping):
        raise ValidationError("dict args need an explicit kind=...: insert(args, kind='my_kind')")
    if isinstance(args, type):
        return _kind_of_class_name(args.__name__)
    return _kind_of_class_name(type(args).__name__)


def kind_of_type(args_type: type[Any] | str) -> str:
    """The kind registered for an args type, or the string itself when given a kind."""
    if isinstance(args_type, str):
        return validate_kind(args_type)
    return validate_kind(snake_case(args_type.__name__))


#: Values that ``dataclasses.asdict`` returns as they are (its deep copy keeps them).
_ATOMIC = frozenset({str, int, float, bool, type(None)})


@functools.lru_cache(maxsize=1024)
def _dataclass_fields(cls: type) -> tuple[str, ...] | None:
    """The field names of dataclass ``cls`` in ``asdict`` order; None for other classes."""
    if not dataclasses.is_dataclass(cls) or issubclass(cls, Mapping):
        return None
    return tuple(f.name for f in dataclasses.fields(cls))


def _flat_dataclass(args: object) -> dict[str, Any] | None:
    """``asdict(args)`` for a dataclass whose fields all hold scalars, else None.

    The usual args, without the recursive deep copy of ``asdict``.
    """
    names = _dataclass_fields(type(args))
    if names is None:
        return None
    data = {name: getattr(args, name) for name in names}
    for value in data.values():
        if type(value) not in _ATOMIC:
            return None
    return data


def _to_builtins(args: object) -> dict[str, Any]:
    if isinstance(args, Mapping):
        return dict(cast(Mapping[str, Any], args))
    if dataclasses.is_dataclass(args) and not isinstance(args, type):
        return dataclasses.asdict(args)
    dump = getattr(args, "model_dump", None)  # pydantic v2
    if callable(dump):
        return cast(dict[str, Any], dump(mode="json"))
    if hasattr(type(args), "__struct_fields__"):  # msgspec.Struct
        import msgspec

        return cast(dict[str, Any], msgspec.to_builtins(args))
    raise SerializationError(
        f"cannot use {type(args).__name__} as job args: "
        "pass a dataclass, a pydantic model, a msgspec struct or a dict"
    )


def _reject(value: object) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_reject
)


def dumps(value: object, what: str = "args") -> str:
    """Encode ``value`` as compact JSON that PostgreSQL's jsonb accepts.

    Raises :class:`wai.SerializationError` for what JSON cannot hold, and
    :class:`wai.ValidationError` naming the path of a string or key PostgreSQL cannot
    store (a NUL byte, a lone surrogate): see :mod:`wai._storable`.
    """
    try:
        text = _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"{what} cannot be encoded as JSON: {exc}") from exc
    # The encoded text is checked, not the value: one scan of a string in C. The encoder
    # writes NUL as the escape \u0000 (a literal backslash-u0000 also matches: the walk
    # then finds nothing), and leaves a lone surrogate as it is, which only a non-ASCII
    # text can hold.
    if "\\u0000" in text:
        check_json(value, what)
    if text.isascii():  # O(1) in CPython
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate such as "\ud800"
        check_json(value, what)  # raises, naming where it is
        raise SerializationError(f"{what} cannot be encoded as UTF-8: {exc}") from exc
    return text


#: The integers orjson encodes (it refuses wider ones; the stdlib encoder takes them).
_ORJSON_INT_MIN, _ORJSON_INT_MAX = -(2**63), 2**64 - 1


def _dumps_flat(data: dict[str, Any]) -> str | None:
    """orjson's encoding of flat args (scalar values), None where :func:`dumps` must decide.

    For these values orjson writes what the stdlib encoder would, up to how a float's
    exponent is spelled (the same number to jsonb, and unique keys re-encode args
    canonically), several times faster. It would write NaN and infinities as null and
    refuses integers beyond 64 bits: those go the stdlib way, which stores or rejects them
    exactly as before. A NUL byte (which orjson escapes) and a lone surrogate (which it
    refuses) are refused here, naming the field.
    """
    for value in data.values():
        if type(value) is float and not math.isfinite(value):
            return None
        if type(value) is int and not _ORJSON_INT_MIN <= value <= _ORJSON_INT_MAX:
            return None
    try:
        text = orjson.dumps(data).decode()
    except orjson.JSONEncodeError:  # of flat values, only a lone surrogate
        check_json(data, "args")  # raises, naming the field
        return None
    if "\\u0000" in text:  # orjson escapes NUL; a literal backslash-u0000 matches too
        check_json(data, "args")
    return text


def encode_args(args: object) -> str:
    """Encode job args (dataclass, pydantic model, msgspec struct or dict) to JSON."""
    data = _flat_dataclass(args)
    if data is not None:
        text = _dumps_flat(data)
        if text is not None:
            return text
    else:
        data = _to_builtins(args)
        if not all(isinstance(k, str) for k in data):
            raise SerializationError("args keys must be strings")
    return dumps(data, "args")


def decode_args(args_type: type[Any] | None, data: dict[str, Any]) -> Any:
    """Decode stored args into ``args_type``; a plain dict when no type is registered."""
    if args_type is None or args_type is dict:
        return data
    try:
        if dataclasses.is_dataclass(args_type):
            return args_type(**data)
        validate = getattr(args_type, "model_validate", None)  # pydantic v2
        if callable(validate):
            return validate(data)
        if hasattr(args_type, "__struct_fields__"):  # msgspec.Struct
            import msgspec

            return msgspec.convert(data, args_type)
        return args_type(**data)
    except Exception as exc:
        raise SerializationError(
            f"stored args do not decode into {args_type.__name__}: {type(exc).__name__}: {exc}"
        ) from exc
