"""Whether PostgreSQL can store a value: checks of caller input before anything is written.

PostgreSQL refuses the NUL character in ``text`` and in ``jsonb`` strings (also as the
JSON escape ``\\u0000``), and stores only valid UTF-8, which a Python string holding a
lone surrogate (``"\\ud800"``) cannot be encoded to. Such input is refused at the call
with a :class:`wai.ValidationError` naming the field (and, inside a JSON value, the path
to the offending string or key), so it never fails late in the database or poisons a
batch. Text that wai writes itself is escaped instead: see :mod:`wai._text`.
"""

from __future__ import annotations

from typing import Any, cast

from wai.errors import ValidationError

__all__ = ["check_json", "check_text"]


def _problem(text: str) -> str | None:
    """What makes ``text`` unstorable, or None when PostgreSQL can store it."""
    if "\x00" in text:
        return "contains a NUL byte, which PostgreSQL cannot store"
    if text.isascii():  # O(1) in CPython; ASCII holds no lone surrogate
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        return f"contains a lone surrogate {bad!r}, which is not valid UTF-8"
    return None


def check_text(value: str, field: str) -> None:
    """Raise :class:`wai.ValidationError` naming ``field`` unless PostgreSQL can store ``value``.

    ``value`` must be a string without NUL bytes and without lone surrogates.
    """
    if not isinstance(value, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValidationError(f"{field}: must be a string, got {type(value).__name__}")
    problem = _problem(value)
    if problem is not None:
        raise ValidationError(f"{field}: {problem}")


def check_json(value: object, field: str) -> None:
    """Raise :class:`wai.ValidationError` unless every string in ``value`` is storable.

    Walks dicts (their keys too), lists and tuples; the error names the path of the
    first bad string from ``field``, e.g. ``args['name'][2]``, or ``args key 'a\\x00'``
    for a key. Other values (numbers, None, ...) are left to the JSON encoder.
    """
    _walk(value, field)


def _walk(value: object, path: str) -> None:
    if isinstance(value, str):
        problem = _problem(value)
        if problem is not None:
            raise ValidationError(f"{path}: {problem}")
    elif isinstance(value, dict):
        for key, item in cast(dict[Any, Any], value).items():
            if isinstance(key, str):
                problem = _problem(key)
                if problem is not None:
                    raise ValidationError(f"{path} key {key!r}: {problem}")
            _walk(item, f"{path}[{key!r}]")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(cast(list[Any], value)):
            _walk(item, f"{path}[{i}]")
