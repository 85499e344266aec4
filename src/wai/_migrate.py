"""Schema migrations: numbered, forward-only SQL files applied under an advisory lock."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from psycopg import sql

from wai._sql import render, validate_schema

__all__ = ["Migration", "ledger_sql", "lock_key", "migrations", "pending", "script"]

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file: its number, name and SQL (with ``{schema}`` placeholders)."""

    version: int
    name: str
    text: str

    def rendered(self, schema: str) -> str:
        """The SQL of this migration for ``schema``."""
        return render(self.text, schema)


def migrations() -> list[Migration]:
    """Every migration shipped with this version of wai, in order."""
    folder = resources.files("wai") / "sql" / "migrations"
    found: list[Migration] = []
    for entry in folder.iterdir():
        m = _FILE.match(entry.name)
        if m:
            found.append(Migration(int(m[1]), m[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda mig: mig.version)
    versions = [mig.version for mig in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations must be numbered 1..n without gaps, got {versions}")
    return found


def lock_key(schema: str) -> int:
    """The advisory lock that serializes migrators of one schema."""
    digest = hashlib.blake2b(f"wai._migrate.{schema}".encode(), digest_size=8).digest()
    # Eight bytes, signed: the bigint that pg_advisory_xact_lock takes.
    return int.from_bytes(digest, "big", signed=True)


def ledger_sql(schema: str) -> sql.Composed:
    """Create the schema and its migrations ledger if they are missing."""
    ident = sql.Identifier(validate_schema(schema))
    return sql.SQL(
        "CREATE SCHEMA IF NOT EXISTS {s};"
        " CREATE TABLE IF NOT EXISTS {s}.migrations ("
        " version integer PRIMARY KEY, name text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())"
    ).format(s=ident)


def pending(applied: set[int]) -> list[Migration]:
    """The migrations not yet in ``applied``."""
    return [m for m in migrations() if m.version not in applied]


def script(schema: str = "wai") -> str:
    """Every migration as one SQL script, for review or for applying by hand."""
    out = [ledger_sql(schema).as_string() + ";"]
    for m in migrations():
        out.append(f"-- {m.version:04d}_{m.name}\n{m.rendered(schema)}")
        out.append(
            sql.SQL("INSERT INTO {s}.migrations (version, name) VALUES ({v}, {n});")
            .format(s=sql.Identifier(schema), v=sql.Literal(m.version), n=sql.Literal(m.name))
            .as_string()
        )
    return "\n\n".join(out) + "\n"
