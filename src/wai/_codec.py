"""The args codec: job args to the JSON a row stores, and back to the args type (pure, no I/O).

Dataclass args are encoded by their values and decoded by their type hints with
msgspec (``msgspec.to_builtins`` and ``msgspec.convert``): a field typed ``datetime``
(aware or naive), ``date``, ``time``, ``UUID``, ``Decimal`` (exact, as a string), an
enum (by value), a nested dataclass, ``list``/``tuple``/``dict[str, ...]``, ``X | None``
or ``Literal`` reaches the handler as that type again, and a stored value that no longer
fits its field fails with the path of the field (``Signup.profile.created: ...``).
msgspec does this in C, resolves the hints against the class's module (so ``from
__future__ import annotations`` works) and already decodes the msgspec structs wai takes:
one well-kept library instead of a converter of our own. On the way in it is about
three times faster than the ``dataclasses.asdict`` it replaces; on the way out
``msgspec.convert`` costs a few hundred nanoseconds more per job than ``Type(**fields)``,
the price of checking every field against its type.

The usual args, a dataclass of strings, numbers, booleans and None, skip msgspec on the
way in: orjson encodes their field values directly (see :func:`_dumps_flat`). Pydantic
models keep their own codec (``model_dump(mode="json")``, ``model_validate``), and dict
args hold JSON values only: they have no type to decode a datetime back into.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Mapping
from typing import Any, cast

import msgspec
import orjson

from wai._storable import check_json
from wai.errors import SerializationError

__all__ = ["check_decodable", "decode_args", "dumps", "encode_args"]

#: Values that JSON holds as they are.
_ATOMIC = frozenset({str, int, float, bool, type(None)})


def _is_struct(cls: type) -> bool:
    return hasattr(cls, "__struct_fields__")


# -- encoding ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def _dataclass_fields(cls: type) -> tuple[str, ...] | None:
    """The field names of dataclass ``cls`` in definition order; None for other classes."""
    if not dataclasses.is_dataclass(cls) or issubclass(cls, Mapping):
        return None
    return tuple(f.name for f in dataclasses.fields(cls))


def _flat_dataclass(args: object) -> dict[str, Any] | None:
    """The fields of a dataclass whose fields all hold JSON scalars, else None.

    The usual args, encoded without msgspec's walk.
    """
    names = _dataclass_fields(type(args))
    if names is None:
        return None
    data = {name: getattr(args, name) for name in names}
    for value in data.values():
        if type(value) not in _ATOMIC:
            return None
    return data


def _reject(value: object) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_reject
)


def _json_leaf(value: object) -> bool:
    return type(value) in _ATOMIC or isinstance(value, str | int | float)


def _builtins_leaf(value: object) -> bool:
    try:
        msgspec.to_builtins(value)
    except (TypeError, ValueError):
        return False
    return True


def _parts(value: object, typed: bool) -> list[tuple[str, Any]] | None:
    """The parts of a container as (path step, value); None for a leaf.

    Dicts (``[key]``), lists and tuples (``[index]``) are containers, and when ``typed``
    (msgspec encodes the value) so are any mapping, sets, dataclasses and msgspec
    structs (``.field``).
    """
    if isinstance(value, dict if not typed else Mapping):
        return [(f"[{k!r}]", v) for k, v in cast(Mapping[Any, Any], value).items()]
    if isinstance(value, list | tuple if not typed else list | tuple | set | frozenset):
        return [(f"[{i}]", v) for i, v in enumerate(cast(list[Any], value))]
    if not typed or isinstance(value, type):
        return None
    if dataclasses.is_dataclass(value):
        return [(f".{f.name}", getattr(value, f.name)) for f in dataclasses.fields(value)]
    if _is_struct(type(value)):
        names: tuple[str, ...] = getattr(type(value), "__struct_fields__", ())
        return [(f".{name}", getattr(value, name)) for name in names]
    return None


def _unencodable(
    value: object, path: str, *, typed: bool, depth: int = 0
) -> tuple[str, object] | None:
    """The path and value of the first part of ``value`` that cannot be encoded, if any.

    A leaf can be encoded when it is a JSON scalar, or, when ``typed``, when msgspec
    encodes it. Run only once encoding failed, to name where.
    """
    if depth > 100:  # a cycle, or nesting no args need
        return path, value
    parts = _parts(value, typed)
    if parts is None:
        return None if (_builtins_leaf if typed else _json_leaf)(value) else (path, value)
    for step, item in parts:
        found = _unencodable(item, path + step, typed=typed, depth=depth + 1)
        if found is not None:
            return found
    return None


def dumps(value: object, what: str = "args") -> str:
    """Encode ``value`` as compact JSON that PostgreSQL's jsonb accepts.

    Raises :class:`wai.SerializationError` for what JSON cannot hold, naming the path of
    a value of another type (``metadata['at']: cannot encode object of type datetime``),
    and :class:`wai.ValidationError` naming the path of a string or key PostgreSQL cannot
    store (a NUL byte, a lone surrogate): see :mod:`wai._storable`.
    """
    try:
        text = _ENCODER.encode(value)
    except TypeError as exc:
        found = _unencodable(value, what, typed=False)
        if found is None:
            raise SerializationError(f"{what} cannot be encoded as JSON: {exc}") from exc
        path, bad = found
        raise SerializationError(
            f"{path}: cannot encode object of type {type(bad).__name__}"
            + (_DICT_HINT if what == "args" else "")
        ) from exc
    except ValueError as exc:
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


_DICT_HINT = (
    " (dict args hold JSON values only; a dataclass args type also carries datetime, "
    "date, time, UUID, Decimal, enums and nested dataclasses)"
)

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


def _typed_builtins(args: object) -> dict[str, Any]:
    """A dataclass or msgspec struct as JSON values, by msgspec; errors name the field."""
    try:
        data = msgspec.to_builtins(args)
    except (TypeError, ValueError) as exc:
        found = _unencodable(args, type(args).__name__, typed=True)
        if found is None:
            raise SerializationError(f"{type(args).__name__}: {exc}") from exc
        path, bad = found
        raise SerializationError(
            f"{path}: cannot encode object of type {type(bad).__name__}"
        ) from exc
    return cast(dict[str, Any], data)


def _to_builtins(args: object) -> dict[str, Any]:
    if isinstance(args, Mapping):
        data = dict(cast(Mapping[Any, Any], args))
        if not all(isinstance(k, str) for k in data):
            raise SerializationError("args keys must be strings")
        return data
    if dataclasses.is_dataclass(args) and not isinstance(args, type):
        return _typed_builtins(args)
    dump = getattr(args, "model_dump", None)  # pydantic v2
    if callable(dump):
        return cast(dict[str, Any], dump(mode="json"))
    if _is_struct(type(args)):
        return _typed_builtins(args)
    raise SerializationError(
        f"cannot use {type(args).__name__} as job args: "
        "pass a dataclass, a pydantic model, a msgspec struct or a dict"
    )


def encode_args(args: object) -> str:
    """Encode job args (dataclass, pydantic model, msgspec struct or dict) to JSON."""
    data = _flat_dataclass(args)
    if data is not None:
        text = _dumps_flat(data)
        if text is not None:
            return text
    else:
        data = _to_builtins(args)
    return dumps(data, "args")


# -- decoding ---------------------------------------------------------------------------


def _decoded_by_msgspec(args_type: type[Any]) -> bool:
    return _is_struct(args_type) or dataclasses.is_dataclass(args_type)


def check_decodable(args_type: type[Any]) -> None:
    """Raise :class:`wai.ValidationError` if ``args_type``'s type hints cannot be resolved.

    Dataclass and msgspec args are decoded by their hints; one that names a type its
    module does not define (an import under ``TYPE_CHECKING``) would fail every job.
    """
    if not _decoded_by_msgspec(args_type):
        return
    import msgspec.inspect  # only here: registration time

    try:
        msgspec.inspect.type_info(args_type)
    except Exception as exc:
        raise SerializationError(
            f"{args_type.__name__} cannot be decoded from its type hints: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def _validation_message(args_type: type, exc: msgspec.ValidationError) -> str:
    """msgspec's ``Expected `int`, got `str` - at `$.a[0]``` as ``Args.a[0]: expected ...``."""
    message, _, where = str(exc).partition(" - at `")
    path = where.rstrip("`") if where else "$"
    reason = message[:1].lower() + message[1:]
    return f"{args_type.__name__}{path[1:]}: {reason}"


# How each args type decodes, found once per type: msgspec for dataclasses and structs,
# pydantic's model_validate, else the type called with the fields as keywords.
_DECODERS: dict[type[Any], Callable[[Any], Any]] = {}


def _decoder(args_type: type[Any]) -> Callable[[Any], Any]:
    found = _DECODERS.get(args_type)
    if found is None:
        validate = getattr(args_type, "model_validate", None)  # pydantic v2
        if _decoded_by_msgspec(args_type):
            found = functools.partial(msgspec.convert, type=args_type)
        elif callable(validate):
            found = cast(Callable[[Any], Any], validate)
        else:
            found = functools.partial(_call_with_fields, args_type)
        _DECODERS[args_type] = found
    return found


def _call_with_fields(args_type: type[Any], data: dict[str, Any]) -> Any:
    return args_type(**data)


def decode_args(args_type: type[Any] | None, data: dict[str, Any]) -> Any:
    """Decode stored args into ``args_type``; a plain dict when no type is registered.

    Raises :class:`wai.SerializationError` when they do not fit, naming the field path
    for dataclasses and msgspec structs (``Signup.profile.created: expected ...``).
    """
    if args_type is None or args_type is dict:
        return data
    try:
        return _decoder(args_type)(data)
    except msgspec.ValidationError as exc:
        raise SerializationError(_validation_message(args_type, exc)) from exc
    except Exception as exc:
        raise SerializationError(
            f"stored args do not decode into {args_type.__name__}: {type(exc).__name__}: {exc}"
        ) from exc
