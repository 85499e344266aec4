"""Job kinds and args: naming, encoding to JSON and decoding back (pure, no I/O)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any, cast

from wai.errors import SerializationError, ValidationError

__all__ = ["decode_args", "dumps", "encode_args", "kind_of", "snake_case", "validate_kind"]

_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD = re.compile(r"([a-z0-9])([A-Z])")
_KIND = re.compile(r"^[A-Za-z0-9_.:\-]{1,200}$")


def snake_case(name: str) -> str:
    """``SendEmail`` → ``send_email``, ``HTMLToPDF`` → ``html_to_pdf``."""
    return _WORD.sub(r"\1_\2", _ACRONYM.sub(r"\1_\2", name)).lower()


def validate_kind(kind: str) -> str:
    """Return ``kind`` if it is a usable job kind, else raise ValidationError."""
    if not isinstance(kind, str) or not _KIND.match(kind):
        raise ValidationError(
            f"invalid job kind {kind!r}: use 1-200 letters, digits, '_', '.', ':' or '-'"
        )
    return kind


def kind_of(args: object, kind: str | None = None) -> str:
    """The kind of a job: explicit ``kind``, else the args class name in snake_case."""
    if kind is not None:
        return validate_kind(kind)
    if isinstance(args, Mapping):
        raise ValidationError("dict args need an explicit kind=...: insert(args, kind='my_kind')")
    if isinstance(args, type):
        return validate_kind(snake_case(args.__name__))
    return validate_kind(snake_case(type(args).__name__))


def kind_of_type(args_type: type[Any] | str) -> str:
    """The kind registered for an args type, or the string itself when given a kind."""
    if isinstance(args_type, str):
        return validate_kind(args_type)
    return validate_kind(snake_case(args_type.__name__))


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


def _no_nul(value: object, path: str) -> None:
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError(f"{path} contains a NUL byte, which PostgreSQL cannot store")
    elif isinstance(value, dict):
        for k, v in cast(dict[str, Any], value).items():
            _no_nul(k, path)
            _no_nul(v, f"{path}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(cast(list[Any], value)):
            _no_nul(v, f"{path}[{i}]")


def _reject(value: object) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(value: object, what: str = "args") -> str:
    """Encode ``value`` as compact JSON that PostgreSQL's jsonb accepts."""
    try:
        text = json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_reject
        )
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"{what} cannot be encoded as JSON: {exc}") from exc
    if "\\u0000" in text:
        _no_nul(value, what)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate such as "\ud800"
        raise SerializationError(
            f"{what} cannot be encoded as UTF-8: {exc.object[exc.start : exc.end]!r} "
            "is a lone surrogate"
        ) from exc
    return text


def encode_args(args: object) -> str:
    """Encode job args (dataclass, pydantic model, msgspec struct or dict) to JSON."""
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
