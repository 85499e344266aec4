from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from wai import _sql
from wai._sql import QUERIES, Query, load, parse, query, render, validate_schema
from wai.errors import ValidationError

EXPECTED_QUERIES = {
    "job_insert": "many",
    "job_insert_many": "many",
    "job_get_by_unique_key": "one",
    "job_get": "one",
    "job_list": "many",
    "job_claim": "many",
    "job_finalize_many": "many",
    "job_heartbeat_many": "many",
    "job_heartbeat_finished": "many",
    "job_promote_due": "one",
    "leader_attempt_elect": "one",
    "leader_resign": "exec",
}


def test_loader_parses_every_shipped_query() -> None:
    for name, cardinality in EXPECTED_QUERIES.items():
        assert name in QUERIES, name
        q = QUERIES[name]
        assert q.name == name
        assert q.cardinality == cardinality
        assert "{schema}" in q.text
        assert not q.text.startswith("--")
        assert "-- name:" not in q.text


def test_every_query_renders_for_a_schema() -> None:
    for name, q in QUERIES.items():
        assert q.cardinality in ("one", "many", "exec"), name
        assert q.text.strip(), name
        text = query(name, "jobs_x")
        assert "{schema}" not in text, name
        assert ('"jobs_x".' in text) == ("{schema}." in q.text), name


def test_query_is_cached_per_schema() -> None:
    assert query("job_get", "wai") is query("job_get", "wai")
    assert query("job_get", "wai") != query("job_get", "other")


SOURCE = """\
-- A file comment before the first header is ignored.

-- name: first :one
-- A comment line inside a query is dropped.
SELECT 1
FROM {schema}.jobs;

-- name: second :many
SELECT 2;
-- name: third :exec
DELETE FROM {schema}.jobs
"""


def test_parse_splits_on_headers() -> None:
    assert parse(SOURCE) == [
        Query("first", "one", "SELECT 1\nFROM {schema}.jobs;"),
        Query("second", "many", "SELECT 2;"),
        Query("third", "exec", "DELETE FROM {schema}.jobs"),
    ]


def test_parse_without_headers_finds_nothing() -> None:
    assert parse("SELECT 1;\n-- name: not a header\n") == []


def test_parse_ignores_malformed_headers() -> None:
    # An unknown cardinality is not a header, so its text belongs to the previous query.
    got = parse("-- name: a :one\nSELECT 1;\n-- name: b :all\nSELECT 2;\n")
    assert [q.name for q in got] == ["a"]


def test_parse_keeps_duplicates_for_the_loader_to_reject() -> None:
    got = parse("-- name: a :one\nSELECT 1;\n-- name: a :one\nSELECT 2;\n")
    assert [q.name for q in got] == ["a", "a"]


def _fake_package(monkeypatch: pytest.MonkeyPatch, root: Path, files: dict[str, str]) -> None:
    folder = root / "sql" / "queries"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    monkeypatch.setattr(_sql, "resources", SimpleNamespace(files=lambda _pkg: root))


def test_load_rejects_duplicate_names_in_one_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_package(
        monkeypatch, tmp_path, {"a.sql": "-- name: q :one\nSELECT 1;\n-- name: q :one\nSELECT 2;\n"}
    )
    with pytest.raises(RuntimeError, match="'q' is defined twice"):
        load()


def test_load_rejects_duplicate_names_across_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_package(
        monkeypatch,
        tmp_path,
        {"a.sql": "-- name: q :one\nSELECT 1;\n", "b.sql": "-- name: q :exec\nSELECT 2;\n"},
    )
    with pytest.raises(RuntimeError, match="defined twice"):
        load()


def test_load_reads_only_sql_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_package(
        monkeypatch,
        tmp_path,
        {
            "a.sql": "-- name: qa :one\nSELECT 1;\n",
            "b.sql": "-- name: qb :many\nSELECT 2;\n",
            "README.md": "-- name: ignored :one\nSELECT 3;\n",
        },
    )
    assert sorted(load()) == ["qa", "qb"]


@pytest.mark.parametrize("schema", ["wai", "jobs_x", "_private", "a1", "x" * 63])
def test_validate_schema_accepts_plain_identifiers(schema: str) -> None:
    assert validate_schema(schema) == schema


@pytest.mark.parametrize(
    "schema",
    [
        "wai; drop",
        "wai; DROP SCHEMA wai CASCADE; --",
        'wai"',
        "wai.jobs",
        "Wai",
        "1wai",
        "",
        "x" * 64,
        "wai ",
        "wai-x",
        None,
        5,
    ],
)
def test_validate_schema_rejects_anything_else(schema: object) -> None:
    with pytest.raises(ValidationError, match="invalid schema name"):
        validate_schema(schema)  # pyright: ignore[reportArgumentType]


def test_render_quotes_the_schema() -> None:
    assert render("SELECT * FROM {schema}.jobs", "wai") == 'SELECT * FROM "wai".jobs'


def test_render_rejects_a_hostile_schema() -> None:
    with pytest.raises(ValidationError):
        render("SELECT * FROM {schema}.jobs", "wai; drop")


# -- numbered parameters (the asyncpg bridge) -------------------------------------------


def test_dollar_params_numbers_each_name_once_in_order() -> None:
    text, names = _sql.dollar_params("SELECT %(b)s, %(a)s::int, %(b)s, 'x%%'")
    assert text == "SELECT $1, $2::int, $1, 'x%'"
    assert names == ("b", "a")


def test_dollar_params_refuses_positional_placeholders() -> None:
    with pytest.raises(ValueError, match="only %"):
        _sql.dollar_params("SELECT %s")


@pytest.mark.parametrize("name", ["job_insert", "job_insert_unique", "job_get_by_unique_key"])
def test_dollar_query_keeps_the_statement_and_every_parameter(name: str) -> None:
    text, names = _sql.dollar_query(name, "wai")
    original = query(name, "wai")
    assert "%" not in text
    assert len(names) == len(set(names)) == original.count("%(") - _repeats(original)
    # numbering back gives the psycopg text: the statement itself is unchanged
    for i, param in reversed(list(enumerate(names, 1))):
        text = text.replace(f"${i}", f"%({param})s")
    assert text == original


def _repeats(text: str) -> int:
    import re

    found = re.findall(r"%\((\w+)\)s", text)
    return len(found) - len(set(found))
