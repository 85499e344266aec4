"""docs/architecture.md is the map of src/wai: it names every module, and only real ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "wai"
DOC = (ROOT / "docs" / "architecture.md").read_text()

#: Sync twins generated from an ``*_async.py`` source: the doc names their source.
GENERATED = {
    line.split('"')[3]
    for line in (ROOT / "scripts" / "unasync.py").read_text().splitlines()
    if re.match(r'\s+"[\w/]+_async\.py": "[\w/]+\.py",$', line)
}


def _modules() -> list[str]:
    """Every module of src/wai by its path under it, but package __init__s and twins."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if path.name in ("__init__.py", "__main__.py") or rel in GENERATED:
            continue
        found.append(rel)
    return found


def _mentioned(rel: str) -> bool:
    """Whether the doc names the module: by its file name, or by its package folder."""
    name = rel.rsplit("/", 1)[-1]
    if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", DOC):
        return True
    # a feature package is named as a whole (dlq/, cron/ ...): its modules follow one pattern
    package = rel.split("/", 1)[0] + "/"
    return (
        "/" in rel
        and package not in ("worker/", "maintenance/", "transitions/")
        and (f"{package} " in DOC or f"`{package}`" in DOC)
    )


@pytest.mark.parametrize("rel", _modules())
def test_every_module_is_on_the_map(rel: str) -> None:
    assert _mentioned(rel), f"docs/architecture.md does not name src/wai/{rel}"


def test_every_module_the_map_names_exists() -> None:
    names = set(re.findall(r"(?<![\w/.])(_?[a-z][a-z_]*\.py)\b", DOC))
    names -= {"unasync.py"}  # scripts/, not src/wai
    existing = {p.name for p in SRC.rglob("*.py")}
    tests = {p.name for p in (ROOT / "tests").rglob("*.py")}
    missing = sorted(n for n in names if n not in existing and n not in tests)
    assert missing == []
