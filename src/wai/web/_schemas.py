"""The OpenAPI components of the models, read off their dataclass fields (no hand-kept copy).

A view (:mod:`wai.web._encode`) encodes every field of its model with
:func:`wai._jsonable.jsonable`; this module states the JSON schema of each field
from its annotation by the same rules (a datetime is a ``date-time`` string, bytes
a hex string, a nested model a ``$ref``), then adds the view's extra fields.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Union
from uuid import UUID

from wai.web._encode import VIEWS, View

__all__ = ["ERROR_SCHEMA", "components", "ref", "type_schema"]

#: The body of every error answer.
ERROR_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "stable, for programs"},
                "message": {"type": "string", "description": "what was wrong, for people"},
            },
            "required": ["code", "message"],
        }
    },
    "required": ["error"],
}


def ref(component: str) -> dict[str, Any]:
    """A ``$ref`` to a component schema."""
    return {"$ref": f"#/components/schemas/{component}"}


def _component_of(model: type) -> str | None:
    for view in VIEWS:
        if view.model is model:
            return view.component
    return None


def type_schema(annotation: object) -> dict[str, Any]:
    """The JSON schema of a value annotated ``annotation``, once :func:`jsonable` encoded it."""
    if annotation is Any:  # pyright: ignore[reportUnnecessaryComparison]
        return {}
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        inner = (
            type_schema(members[0])
            if len(members) == 1
            else {"anyOf": [type_schema(m) for m in members]}
        )
        return {"anyOf": [inner, {"type": "null"}]} if len(members) < len(args) else inner
    if origin in (dict, Mapping):
        values = args[1] if len(args) == 2 else Any
        return {
            "type": "object",
            **({} if values is Any else {"additionalProperties": type_schema(values)}),
        }
    if origin in (tuple, list):
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            items = [type_schema(a) for a in args]
            return {
                "type": "array",
                "prefixItems": items,
                "minItems": len(items),
                "maxItems": len(items),
            }
        return {"type": "array", "items": type_schema(args[0]) if args else {}}
    return _class_schema(annotation)


def _class_schema(annotation: object) -> dict[str, Any]:
    if not inspect.isclass(annotation):
        raise TypeError(f"no JSON schema for {annotation!r}")
    component = _component_of(annotation)
    if component is not None:
        return ref(component)
    if issubclass(annotation, enum.Enum):
        return {"type": "string", "enum": [m.value for m in annotation]}
    simple: list[tuple[type, dict[str, Any]]] = [
        (bool, {"type": "boolean"}),  # before int: a bool is an int
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (str, {"type": "string"}),
        (datetime, {"type": "string", "format": "date-time"}),
        (UUID, {"type": "string", "format": "uuid"}),
        (bytes, {"type": "string", "description": "hexadecimal"}),
    ]
    for cls, schema in simple:
        if issubclass(annotation, cls):
            return dict(schema)
    raise TypeError(f"no JSON schema for {annotation!r}")


def _description(model: type) -> str:
    doc = inspect.getdoc(model) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def view_schema(view: View[Any]) -> dict[str, Any]:
    """The component schema of ``view``: every field of its model, then its extras."""
    hints = typing.get_type_hints(view.model)
    properties = {f.name: type_schema(hints[f.name]) for f in dataclasses.fields(view.model)}
    for extra in view.extras:
        properties[extra.name] = dict(extra.schema)
    return {
        "type": "object",
        "description": _description(view.model),
        "properties": properties,
        "required": list(properties),
    }


def components() -> dict[str, dict[str, Any]]:
    """Every model's component schema by name, and ``Error``."""
    found = {view.component: view_schema(view) for view in VIEWS}
    found["Error"] = ERROR_SCHEMA
    return found
