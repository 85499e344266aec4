from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from wai import _migrate as migrate
from wai._migrate import ledger_sql, lock_key, migrations, pending, script
from wai.errors import ValidationError


def test_migrations_are_numbered_without_gaps() -> None:
    found = migrations()
    assert found, "no migrations shipped"
    assert [m.version for m in found] == list(range(1, len(found) + 1))
    assert found[0].name == "jobs"
    for m in found:
        assert re.fullmatch(r"\w+", m.name)
        assert "{schema}" in m.text


def test_migration_files_with_a_gap_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    folder = tmp_path / "sql" / "migrations"
    folder.mkdir(parents=True)
    (folder / "0001_a.sql").write_text("SELECT 1;")
    (folder / "0003_c.sql").write_text("SELECT 3;")
    (folder / "notes.txt").write_text("ignored")
    monkeypatch.setattr(migrate, "resources", SimpleNamespace(files=lambda _pkg: tmp_path))
    with pytest.raises(RuntimeError, match=r"without gaps, got \[1, 3\]"):
        migrations()


def test_migrations_are_sorted_by_number(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    folder = tmp_path / "sql" / "migrations"
    folder.mkdir(parents=True)
    for name in ("0002_b.sql", "0001_a.sql", "0003_c.sql"):
        (folder / name).write_text(f"-- {name}")
    monkeypatch.setattr(migrate, "resources", SimpleNamespace(files=lambda _pkg: tmp_path))
    assert [(m.version, m.name) for m in migrations()] == [(1, "a"), (2, "b"), (3, "c")]


def test_pending_skips_applied_versions() -> None:
    every = [m.version for m in migrations()]
    assert [m.version for m in pending(set())] == every
    assert [m.version for m in pending(set(every))] == []
    assert [m.version for m in pending({1})] == every[1:]


def test_script_contains_the_whole_schema() -> None:
    text = script()
    assert 'CREATE SCHEMA IF NOT EXISTS "wai"' in text
    assert "CREATE TABLE" in text
    assert 'CREATE TABLE "wai".jobs' in text
    assert "{schema}" not in text
    for m in migrations():
        assert f"VALUES ({m.version}, '{m.name}')" in text


def test_script_for_a_custom_schema() -> None:
    text = script("jobs_x")
    assert 'CREATE TABLE "jobs_x".jobs' in text
    assert '"wai"' not in text


def test_script_rejects_a_hostile_schema() -> None:
    with pytest.raises(ValidationError):
        script("wai; drop")
    with pytest.raises(ValidationError):
        ledger_sql("wai; drop")


def test_rendered_migration_uses_the_schema() -> None:
    first = migrations()[0]
    assert '"other".jobs' in first.rendered("other")


def test_lock_key_is_a_stable_signed_bigint_per_schema() -> None:
    assert lock_key("wai") == lock_key("wai")
    assert lock_key("wai") != lock_key("jobs_x")
    for schema in ("wai", "jobs_x", "a"):
        assert -(2**63) <= lock_key(schema) < 2**63
