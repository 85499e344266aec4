"""Whose error it is when ``load_app`` fails: APP's (an ``AppError``) or the module's own."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from wai.cli._app import AppError, load_app


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current directory, with a database URL that is never connected to."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WAI_DATABASE_URL", "postgresql://unused@127.0.0.1:1/unused")
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def _module(workdir: Path, source: str) -> str:
    name = f"app_{uuid.uuid4().hex[:8]}"
    (workdir / f"{name}.py").write_text(source)
    return name


def test_an_attribute_error_while_importing_is_the_modules_own(workdir: Path) -> None:
    name = _module(workdir, "import wai\nclient = wai.AsyncClient()\nwai.no_such_name\n")
    with pytest.raises(AttributeError, match="no_such_name") as caught:
        load_app(f"{name}:client")
    assert not isinstance(caught.value, AppError)


def test_a_missing_dotted_attribute_names_the_whole_path(workdir: Path) -> None:
    name = _module(workdir, "import wai\nclass holder:\n    client = wai.AsyncClient()\n")
    with pytest.raises(AppError, match=rf"module '{name}' has no attribute 'holder.other'"):
        load_app(f"{name}:holder.other")


def test_a_missing_submodule_of_a_package_is_an_app_error(workdir: Path) -> None:
    package = f"pkg_{uuid.uuid4().hex[:8]}"
    (workdir / package).mkdir()
    (workdir / package / "__init__.py").write_text("")
    with pytest.raises(AppError, match=rf"no module named '{package}.tasks'"):
        load_app(f"{package}.tasks:client")
