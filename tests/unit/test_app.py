"""Resolving ``module:attribute`` APP strings, and the CLI's argument parsing."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

import wai
from wai import cli
from wai.cli import worker
from wai.cli._app import AppError, load_app, parse_app


@pytest.mark.parametrize(
    ("app", "expected"),
    [
        ("app:client", ("app", "client")),
        ("pkg.tasks:client", ("pkg.tasks", "client")),
        ("pkg.tasks:registry.client", ("pkg.tasks", "registry.client")),
    ],
)
def test_parse_app_splits_module_and_attribute(app: str, expected: tuple[str, str]) -> None:
    assert parse_app(app) == expected


@pytest.mark.parametrize("app", ["", "app", "app:", ":client", "a:b:c", "a b:c", "1mod:client"])
def test_parse_app_rejects_malformed_strings(app: str) -> None:
    with pytest.raises(AppError, match="module:attribute"):
        parse_app(app)


@pytest.fixture
def app_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh module in the current directory holding ``client`` and ``number``."""
    name = f"app_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        "import wai\nclient = wai.AsyncClient()\nnumber = 42\nclass holder:\n    client = client\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WAI_DATABASE_URL", "postgresql://unused@127.0.0.1:1/unused")
    monkeypatch.setattr(sys, "path", list(sys.path))
    return name


def test_load_app_finds_the_client_in_the_current_directory(app_module: str) -> None:
    assert isinstance(load_app(f"{app_module}:client"), wai.AsyncClient)
    assert load_app(f"{app_module}:holder.client") is load_app(f"{app_module}:client")


@pytest.mark.parametrize(
    ("attr", "message"),
    [("missing", "has no attribute 'missing'"), ("number", "is a builtins.int")],
)
def test_load_app_rejects_missing_or_wrong_attributes(
    app_module: str, attr: str, message: str
) -> None:
    with pytest.raises(AppError, match=message):
        load_app(f"{app_module}:{attr}")


def test_load_app_reports_a_missing_module(app_module: str) -> None:
    with pytest.raises(AppError, match="cannot import module 'no_such_mod_xyz'"):
        load_app("no_such_mod_xyz:client")


def test_load_app_keeps_import_errors_of_the_app_itself(tmp_path: Path, app_module: str) -> None:
    (tmp_path / "broken_app_xyz.py").write_text("import no_such_dependency_xyz\n")
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_xyz"):
        load_app("broken_app_xyz:client")


def test_cli_database_options_work_before_and_after_the_command() -> None:
    parser = cli.build_parser()
    before = parser.parse_args(["--database-url", "postgresql://a", "--schema", "s", "migrate"])
    after = parser.parse_args(["migrate", "--database-url", "postgresql://a", "--schema", "s"])
    for args in (before, after):
        assert (args.database_url, args.schema) == ("postgresql://a", "s")
    assert parser.parse_args(["migrate"]).database_url is None


def test_cli_worker_options() -> None:
    args = cli.build_parser().parse_args(
        ["worker", "app:client", "-q", "email=3", "-q", "default", "--burst",
         "--no-maintenance", "--poll-interval", "0.5"]
    )  # fmt: skip
    assert args.queue == ["email=3", "default"]
    assert (args.burst, args.maintenance, args.poll_interval) == (True, False, 0.5)
    assert args.heartbeat_interval is None
    assert worker._parse_queues(args.queue) == {"email": 3, "default": 10}  # pyright: ignore[reportPrivateUsage]


@pytest.mark.parametrize("argv", [["worker", "a:b", "--poll-interval", "0"], ["nope"], []])
def test_cli_usage_errors_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
