"""Loads the named queries of ``sql/queries/*.sql`` and renders them for a schema."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Literal, LiteralString, cast

from wai.errors import ValidationError

__all__ = [
    "QUERIES",
    "Query",
    "dollar_params",
    "dollar_query",
    "parse",
    "query",
    "render",
    "validate_schema",
]

Cardinality = Literal["one", "many", "exec"]

_HEADER = re.compile(r"^-- name: (\w+) :(one|many|exec)$", re.MULTILINE)
_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# psycopg's placeholders: a named one, an escaped percent sign, or any other percent
_PERCENT = re.compile(r"%\((\w+)\)s|%%|%")


@dataclass(frozen=True, slots=True)
class Query:
    """One named statement; ``text`` still holds the ``{schema}`` placeholder."""

    name: str
    cardinality: Cardinality
    text: str


def parse(source: str) -> list[Query]:
    """Split a queries file on its ``-- name: x :kind`` headers."""
    parts = _HEADER.split(source)[1:]
    queries: list[Query] = []
    for name, cardinality, body in zip(parts[::3], parts[1::3], parts[2::3], strict=True):
        lines = [line for line in body.strip().splitlines() if not line.lstrip().startswith("--")]
        queries.append(Query(name, cast(Cardinality, cardinality), "\n".join(lines)))
    return queries


def load() -> dict[str, Query]:
    """Read every queries file shipped with the package; names must be unique."""
    found: dict[str, Query] = {}
    folder = resources.files("wai") / "sql" / "queries"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        for q in parse(entry.read_text(encoding="utf-8")):
            if q.name in found:
                raise RuntimeError(f"query {q.name!r} is defined twice")
            found[q.name] = q
    return found


QUERIES = load()


def validate_schema(schema: str) -> str:
    """Return ``schema`` if it is a plain lower-case identifier, else raise."""
    if not isinstance(schema, str) or not _SCHEMA.match(schema):
        raise ValidationError(
            f"invalid schema name {schema!r}: use a lower-case identifier such as 'wai'"
        )
    return schema


def render(text: str, schema: str) -> LiteralString:
    """Put the (validated) schema name in place of ``{schema}``."""
    # The text ships inside the package and the schema matches a strict identifier
    # pattern, so the result is as trusted as a literal.
    return cast(LiteralString, text.replace("{schema}", f'"{validate_schema(schema)}"'))


@functools.cache
def query(name: str, schema: str) -> LiteralString:
    """The text of query ``name`` rendered for ``schema`` (cached)."""
    return render(QUERIES[name].text, schema)


def dollar_params(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` with psycopg's ``%(name)s`` placeholders as ``$1..$n``, and the names in order.

    For drivers that take numbered parameters (asyncpg). A name used twice gets one number;
    ``%%`` becomes ``%``. Any other ``%`` (a positional ``%s``) is refused: the named
    queries use named parameters only.
    """
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            if match.group(0) == "%%":
                return "%"
            raise ValueError(f"only %(name)s placeholders can be numbered, found {text!r}")
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PERCENT.sub(number, text), tuple(names)


@functools.cache
def dollar_query(name: str, schema: str) -> tuple[str, tuple[str, ...]]:
    """Query ``name`` rendered for ``schema`` with numbered parameters (cached); see
    :func:`dollar_params`."""
    return dollar_params(query(name, schema))
