"""Parameters of the admin API: checked values out of URL text and JSON bodies (pure, no I/O).

Each :class:`Param` names one path segment, query parameter or body field and its
type; the type parses the raw value and states its JSON schema, so the routes
(:mod:`wai.web._routes`) check exactly what the OpenAPI document says. Anything
that does not parse raises :class:`wai.ValidationError` naming the parameter (a
400). Query strings are strict: an unknown or repeated parameter is an error, so
that a typo (``?stat=failed``) never silently lists everything.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, Protocol

from wai._kinds import validate_kind, validate_queue
from wai._storable import check_text
from wai.callbacks._waiting import decode_waiting_cursor
from wai.dlq._models import decode_cursor
from wai.errors import ValidationError

__all__ = [
    "DLQ_CURSOR",
    "MAX_ID",
    "WAITING_CURSOR",
    "Boolean",
    "Choice",
    "Cursor",
    "Integer",
    "Kind",
    "Param",
    "ParamType",
    "Queue",
    "Secret",
    "Text",
    "Timestamp",
    "parse_body",
    "parse_path",
    "parse_query",
]

#: The largest id PostgreSQL's ``bigint`` holds.
MAX_ID: Final = 2**63 - 1

_INTEGER = re.compile(r"-?[0-9]+")  # ASCII digits only: int() also takes "١٢", "1_0", " 1"

Where = Literal["path", "query", "body"]


class ParamType(Protocol):
    """How one parameter is read and documented."""

    def from_text(self, name: str, text: str) -> Any:
        """The value of a path segment or query parameter, or a ValidationError."""
        ...

    def from_json(self, name: str, value: object) -> Any:
        """The value of a JSON body field, or a ValidationError."""
        ...

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the parameter."""
        ...


@dataclass(frozen=True, slots=True)
class Integer:
    """A whole number from ``low`` to ``high`` (ASCII digits in a URL, a JSON integer in a body)."""

    low: int
    high: int

    def from_text(self, name: str, text: str) -> int:
        """Parse ``text``; only ``-?[0-9]+`` is a number here."""
        if not _INTEGER.fullmatch(text):
            raise ValidationError(f"{name} must be an integer, got {text[:50]!r}")
        if len(text.lstrip("-").lstrip("0")) > 40:  # no bound here has 40 digits: skip int()
            raise ValidationError(f"{name} must be from {self.low} to {self.high}")
        return self._within(name, int(text))

    def from_json(self, name: str, value: object) -> int:
        """Check ``value``: an integer, never a boolean or a float."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(f"{name} must be an integer, got {value!r:.80}")
        return self._within(name, value)

    def _within(self, name: str, value: int) -> int:
        if not self.low <= value <= self.high:
            raise ValidationError(f"{name} must be from {self.low} to {self.high}, got {value}")
        return value

    def schema(self) -> dict[str, Any]:
        """``integer`` with its bounds."""
        return {"type": "integer", "minimum": self.low, "maximum": self.high}


@dataclass(frozen=True, slots=True)
class Text:
    """A string of 1 to ``max_length`` characters that PostgreSQL can store (no NUL, no lone
    surrogate)."""

    max_length: int = 200

    def from_text(self, name: str, text: str) -> str:
        """Check ``text``."""
        return self.from_json(name, text)

    def from_json(self, name: str, value: object) -> str:
        """Check ``value``: a string of the right length and storable characters."""
        if not isinstance(value, str):
            raise ValidationError(f"{name} must be a string, got {type(value).__name__}")
        if not 1 <= len(value) <= self.max_length:
            raise ValidationError(
                f"{name} must be 1 to {self.max_length} characters, got {len(value)}"
            )
        check_text(value, name)
        return value

    def schema(self) -> dict[str, Any]:
        """``string`` with its length bounds, and no NUL (a lone surrogate is not valid JSON)."""
        return {
            "type": "string",
            "minLength": 1,
            "maxLength": self.max_length,
            "pattern": rf"^[^\x00]{{1,{self.max_length}}}$",
        }


@dataclass(frozen=True, slots=True)
class Secret:
    """A token sent to be checked: a string of 1 to ``max_length`` characters, never echoed."""

    max_length: int = 4096

    def from_text(self, name: str, text: str) -> str:
        """Check ``text``."""
        return self.from_json(name, text)

    def from_json(self, name: str, value: object) -> str:
        """Check ``value``; an error names the field, never the value."""
        if not isinstance(value, str):
            raise ValidationError(f"{name} must be a string, got {type(value).__name__}")
        if not 1 <= len(value) <= self.max_length:
            raise ValidationError(f"{name} must be 1 to {self.max_length} characters")
        return value

    def schema(self) -> dict[str, Any]:
        """``string`` with its length bounds, write-only."""
        return {"type": "string", "minLength": 1, "maxLength": self.max_length, "writeOnly": True}


class _Name:
    """A name wai checks with ``_check``: 1 to 200 of ``A-Z a-z 0-9 _ . : -``."""

    __slots__ = ()

    @staticmethod
    def _check(value: str, /) -> str:
        raise NotImplementedError

    def from_text(self, name: str, text: str) -> str:
        """Check ``text``."""
        return self.from_json(name, text)

    def from_json(self, name: str, value: object) -> str:
        """Check ``value`` as wai checks every such name."""
        if not isinstance(value, str):
            raise ValidationError(f"{name} must be a string, got {type(value).__name__}")
        try:
            return self._check(value)
        except ValidationError as exc:
            raise ValidationError(f"{name}: {exc}") from None

    def schema(self) -> dict[str, Any]:
        """``string`` with the name pattern."""
        return {"type": "string", "pattern": r"^[A-Za-z0-9_.:\-]{1,200}$"}


@dataclass(frozen=True, slots=True)
class Queue(_Name):
    """A queue name: 1 to 200 of ``A-Z a-z 0-9 _ . : -``."""

    _check = staticmethod(validate_queue)


@dataclass(frozen=True, slots=True)
class Kind(_Name):
    """A job kind: 1 to 200 of ``A-Z a-z 0-9 _ . : -``."""

    _check = staticmethod(validate_kind)


@dataclass(frozen=True, slots=True)
class Choice:
    """One of a fixed set of strings (a job state, an outbox state)."""

    values: tuple[str, ...]

    def from_text(self, name: str, text: str) -> str:
        """Check ``text``."""
        return self.from_json(name, text)

    def from_json(self, name: str, value: object) -> str:
        """Check that ``value`` is one of the choices."""
        if not isinstance(value, str) or value not in self.values:
            raise ValidationError(
                f"{name} must be one of {', '.join(self.values)}; got {value!r:.80}"
            )
        return value

    def schema(self) -> dict[str, Any]:
        """``string`` with its ``enum``."""
        return {"type": "string", "enum": list(self.values)}


@dataclass(frozen=True, slots=True)
class Boolean:
    """``true`` or ``false`` (JSON booleans only: not ``1``, not ``"yes"``)."""

    def from_text(self, name: str, text: str) -> bool:
        """``"true"`` or ``"false"``."""
        if text not in ("true", "false"):
            raise ValidationError(f"{name} must be true or false, got {text!r:.80}")
        return text == "true"

    def from_json(self, name: str, value: object) -> bool:
        """A JSON boolean."""
        if not isinstance(value, bool):
            raise ValidationError(f"{name} must be true or false, got {value!r:.80}")
        return value

    def schema(self) -> dict[str, Any]:
        """``boolean``."""
        return {"type": "boolean"}


@dataclass(frozen=True, slots=True)
class Timestamp:
    """An ISO 8601 date and time with a UTC offset (``2026-05-01T12:00:00Z``)."""

    def from_text(self, name: str, text: str) -> datetime:
        """Parse ``text``; a time without an offset is ambiguous and refused."""
        return self.from_json(name, text)

    def from_json(self, name: str, value: object) -> datetime:
        """Parse ``value``, a string."""
        if not isinstance(value, str) or len(value) > 64:
            raise ValidationError(f"{name} must be an ISO 8601 date and time, got {value!r:.80}")
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValidationError(
                f"{name} must be an ISO 8601 date and time, got {value!r:.80}"
            ) from None
        if moment.tzinfo is None:
            raise ValidationError(f"{name} needs a UTC offset (Z or +HH:MM), got {value!r:.80}")
        return moment

    def schema(self) -> dict[str, Any]:
        """``string`` in ``date-time`` format."""
        return {"type": "string", "format": "date-time"}


@dataclass(frozen=True, slots=True)
class Cursor:
    """A paging cursor wai made (a dead-letter entry's, a waiting job's), continuing a
    listing after its item: ``decode`` raises a ValidationError for anything else."""

    decode: Callable[[str], object]
    what: str

    def from_text(self, name: str, text: str) -> str:
        """Check that ``text`` is a cursor wai made."""
        return self.from_json(name, text)

    def from_json(self, name: str, value: object) -> str:
        """Check ``value``."""
        if not isinstance(value, str) or len(value) > 100:
            raise ValidationError(f"{name} must be {self.what}, got {value!r:.80}")
        check_text(value, name)
        try:
            self.decode(value)
        except ValidationError as exc:
            raise ValidationError(f"{name}: {exc}") from None
        return value

    def schema(self) -> dict[str, Any]:
        """``string`` (opaque), without NUL."""
        return {"type": "string", "minLength": 1, "maxLength": 100, "pattern": r"^[^\x00]{1,100}$"}


#: The ``cursor`` of a dead-letter entry.
DLQ_CURSOR: Final = Cursor(decode_cursor, "an entry's cursor")
#: The ``cursor`` of a waiting job.
WAITING_CURSOR: Final = Cursor(decode_waiting_cursor, "a waiting job's cursor")


@dataclass(frozen=True, slots=True, kw_only=True)
class Param:
    """One parameter: its name, type, description and default (the value when absent).

    ``slashes`` lets a path parameter hold ``/`` (a schedule name may).
    """

    name: str
    type: ParamType
    description: str
    default: Any = None
    required: bool = False
    slashes: bool = False


def parse_path(params: Sequence[Param], found: Mapping[str, Any]) -> dict[str, Any]:
    """The path segments of a matched route, checked."""
    return {p.name: p.type.from_text(p.name, str(found[p.name])) for p in params}


def parse_query(params: Sequence[Param], items: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """The query parameters, checked; an unknown or repeated name is an error."""
    known = {p.name: p for p in params}
    out: dict[str, Any] = {}
    for name, text in items:
        param = known.get(name)
        if param is None:
            accepted = ", ".join(known) or "none"
            raise ValidationError(f"unknown query parameter {name!r:.80} (accepted: {accepted})")
        if name in out:
            raise ValidationError(f"query parameter {name!r:.80} is given more than once")
        out[name] = param.type.from_text(name, text)
    return _completed(params, out, "query parameter")


def parse_body(fields: Sequence[Param], body: object) -> dict[str, Any]:
    """The fields of a JSON object body; unknown fields are errors."""
    if not isinstance(body, dict):
        raise ValidationError(f"the body must be a JSON object, got {type(body).__name__}")
    known = {f.name: f for f in fields}
    given: dict[object, object] = body  # pyright: ignore[reportUnknownVariableType]
    out: dict[str, Any] = {}
    for name, value in given.items():
        field = known.get(name) if isinstance(name, str) else None
        if field is None:
            accepted = ", ".join(known) or "none"
            raise ValidationError(f"unknown field {name!r:.80} in the body (accepted: {accepted})")
        out[field.name] = field.type.from_json(field.name, value)
    return _completed(fields, out, "body field")


def _completed(params: Sequence[Param], found: dict[str, Any], what: str) -> dict[str, Any]:
    for p in params:
        if p.name not in found:
            if p.required:
                raise ValidationError(f"{what} {p.name!r} is required")
            found[p.name] = p.default
    return found
