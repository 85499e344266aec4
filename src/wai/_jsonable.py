"""Models as plain JSON data: what ``--json`` prints and what the admin HTTP API answers."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, cast
from uuid import UUID

__all__ = ["jsonable"]


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: dataclasses become objects, datetimes ISO 8601 text.

    UUIDs become strings, bytes hex, enums their value, tuples and sets lists.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Mapping):
        mapping = cast(Mapping[Any, Any], value)
        return {str(k): jsonable(v) for k, v in mapping.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in cast(Iterable[Any], value)]
    return value
