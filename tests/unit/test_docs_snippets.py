"""The ```python blocks of README.md and docs/*.md run as written, or say they are fragments.

The rules every block follows (for whoever edits the documentation):

- **It compiles** (``compile()`` as a module): no ``await`` outside an ``async def``.
  Show awaited calls inside the function they would live in (a handler, a view, a
  ``main``).
- **It names nothing undefined** (ruff's F821): it imports or defines every name it
  uses. Your application's own objects are imported from a ``myapp`` module (``from
  myapp.tasks import client``), which need not exist: the check is static.
- **Unless it is a fragment**: an HTML comment ``<!-- fragment -->`` on the line just
  before the fence (invisible once rendered) exempts a block from the F821 check, not
  from compiling. Keep fragments for the few blocks that continue an earlier one or
  list alternatives.
- **A block preceded by** ``<!-- file: PATH -->`` **is that file of the repository**,
  byte for byte (the README's Quickstart shows ``examples/quickstart/``).

An interactive session is a ```pycon block, which is not checked.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_FRAGMENT = "<!-- fragment -->"
_FILE = re.compile(r"^<!-- file: (?P<path>\S+) -->$")


@dataclass(frozen=True)
class Block:
    """One ```python block: where it starts, its code, and the comment just before it."""

    doc: Path
    line: int  # of the opening fence, 1-based
    code: str
    marker: str  # the line before the fence, stripped

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    @property
    def fragment(self) -> bool:
        return self.marker == _FRAGMENT


def python_blocks(doc: Path) -> list[Block]:
    """Every ```python block of ``doc``; an unclosed one is an error."""
    lines = doc.read_text().splitlines(keepends=True)
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].rstrip() != "```python":
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        assert i < len(lines), f"{doc}:{start + 1}: unclosed ```python block"
        marker = lines[start - 1].strip() if start > 0 else ""
        blocks.append(Block(doc, start + 1, "".join(body), marker))
        i += 1
    return blocks


BLOCKS = [block for doc in DOCS for block in python_blocks(doc)]


def test_the_docs_have_python_blocks() -> None:
    assert len(BLOCKS) >= 20  # the parser found them (not a silently empty suite)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.where)
def test_block_compiles(block: Block) -> None:
    try:
        compile(block.code, block.where, "exec")
    except SyntaxError as exc:
        pytest.fail(f"{block.where}: does not compile: {exc}")


@pytest.fixture(scope="module")
def undefined_names(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """ruff F821 over every block that is not a fragment, in one run: where -> messages."""
    folder = tmp_path_factory.mktemp("snippets")
    files: dict[str, str] = {}
    for n, block in enumerate(BLOCKS):
        if not block.fragment:
            path = folder / f"block_{n}.py"
            path.write_text(block.code)
            files[path.name] = block.where
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", "F821",
         "--output-format", "json", "--exit-zero", str(folder)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    found: dict[str, list[str]] = {}
    for item in json.loads(done.stdout):
        where = files[Path(item["filename"]).name]
        found.setdefault(where, []).append(f"line {item['location']['row']}: {item['message']}")
    return found


@pytest.mark.parametrize("block", [b for b in BLOCKS if not b.fragment], ids=lambda b: b.where)
def test_block_names_nothing_undefined(block: Block, undefined_names: dict[str, list[str]]) -> None:
    assert undefined_names.get(block.where, []) == [], (
        f"{block.where}: import or define these names, or mark the block {_FRAGMENT}"
    )


def test_the_undefined_name_check_catches_an_undefined_name(tmp_path: Path) -> None:
    # The same ruff call on a known-bad snippet: the check above is not vacuous.
    (tmp_path / "bad.py").write_text("client.insert(Signup(user_id=7))\n")
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", "F821",
         "--output-format", "json", "--exit-zero", str(tmp_path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert sorted(item["message"] for item in json.loads(done.stdout)) == [
        "Undefined name `Signup`",
        "Undefined name `client`",
    ]


def test_markers_stand_only_before_python_blocks() -> None:
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        for n, line in enumerate(lines):
            if line.strip() == _FRAGMENT or _FILE.match(line.strip()):
                following = lines[n + 1] if n + 1 < len(lines) else ""
                assert following.rstrip() == "```python", (
                    f"{doc.relative_to(ROOT)}:{n + 1}: {line.strip()} must be followed by ```python"
                )


def test_blocks_marked_with_a_file_are_that_file() -> None:
    shown: dict[str, Block] = {}
    for block in BLOCKS:
        match = _FILE.match(block.marker)
        if match:
            shown[match["path"]] = block
            assert block.code == (ROOT / match["path"]).read_text(), (
                f"{block.where} differs from {match['path']}: copy the file into the block"
            )
    # The README's Quickstart shows the example app and its producer script.
    for path in ("examples/quickstart/myapp.py", "examples/quickstart/enqueue.py"):
        assert path in shown, f"README.md shows no block marked <!-- file: {path} -->"
        assert shown[path].doc.name == "README.md"
