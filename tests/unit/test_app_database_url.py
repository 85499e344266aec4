"""``load_app`` tells an APP that needs a database URL from one that fails otherwise."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

import wai
from wai.cli._app import AppNeedsDatabaseURL, load_app


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current directory, with no database URL in the environment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WAI_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def _module(workdir: Path, source: str) -> str:
    name = f"app_{uuid.uuid4().hex[:8]}"
    (workdir / f"{name}.py").write_text(source)
    return name


@pytest.mark.parametrize("client", ["wai.AsyncClient()", "wai.Client()"])
def test_a_client_without_url_needs_one_and_imports_again_once_it_is_set(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    name = _module(workdir, f"import wai\nother = {client}\nclient = wai.AsyncClient()\n")
    with pytest.raises(AppNeedsDatabaseURL, match="without a database URL"):
        load_app(f"{name}:client")
    assert name not in sys.modules  # so that it can be imported again

    monkeypatch.setenv("WAI_DATABASE_URL", "postgresql://unused@127.0.0.1:1/unused")
    assert load_app(f"{name}:client").database_url == "postgresql://unused@127.0.0.1:1/unused"


def test_a_client_with_its_own_url_needs_none(workdir: Path) -> None:
    name = _module(workdir, "import wai\nclient = wai.AsyncClient('postgresql://a@h:1/app')\n")
    assert load_app(f"{name}:client").database_url == "postgresql://a@h:1/app"


def test_other_validation_errors_of_the_app_are_its_own(workdir: Path) -> None:
    name = _module(
        workdir, "import wai\nclient = wai.AsyncClient('postgresql://a@h:1/app', schema='no way')\n"
    )
    with pytest.raises(wai.ValidationError) as caught:
        load_app(f"{name}:client")
    assert not isinstance(caught.value, AppNeedsDatabaseURL)
