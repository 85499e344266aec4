"""The web UI's sources keep the rules that make it safe and self-contained, read as text.

- No HTML sink: nothing assigns ``innerHTML``/``outerHTML``, calls
  ``insertAdjacentHTML``/``document.write``/``eval``, or otherwise turns a string into
  markup or code; data only ever becomes text nodes (``textContent``).
- Nothing the Content-Security-Policy would refuse: no inline script or style, no
  ``style`` attribute, no event-handler attribute.
- Nothing from elsewhere: no URL with a scheme (no CDN, no web font), no absolute path
  (the app may be mounted under any prefix), no ``@import``.
- Every module imports files that exist, and every module is reached from ``main.js``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wai.web._ui import UI_DIR

SOURCES = sorted(p for p in UI_DIR.rglob("*") if p.is_file())
SCRIPTS = [p for p in SOURCES if p.suffix == ".js"]
INDEX = UI_DIR / "index.html"

#: (pattern, why) that no script may contain.
FORBIDDEN_IN_JS = [
    (r"\binnerHTML\b", "innerHTML parses markup"),
    (r"\bouterHTML\b", "outerHTML parses markup"),
    (r"\binsertAdjacentHTML\b", "insertAdjacentHTML parses markup"),
    (r"\bdocument\.write(ln)?\b", "document.write parses markup"),
    (r"\bcreateContextualFragment\b", "a Range fragment parses markup"),
    (r"\bDOMParser\b", "DOMParser parses markup"),
    (r"\bsrcdoc\b", "srcdoc is markup"),
    (r"\beval\s*\(", "eval runs text as code"),
    (r"\bnew\s+Function\b", "Function runs text as code"),
    (r"\bset(Timeout|Interval)\s*\(\s*[\"'`]", "a string timer runs text as code"),
    (r"javascript:", "a javascript: URL runs code"),
    (r"\.style\s*[.=\[]|cssText|setAttribute\(\s*[\"']style", "inline style: the CSP refuses it"),
    (r"setAttribute\(\s*[\"']on", "an event-handler attribute: the CSP refuses it"),
]

_SVG_NAMESPACE = "http://www.w3.org/2000/svg"


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_the_ui_ships_what_index_html_loads() -> None:
    names = {p.relative_to(UI_DIR).as_posix() for p in SOURCES}
    assert {"index.html", "style.css", "favicon.svg", "js/main.js", "js/api.js"} <= names
    for page in ("dashboard", "queues", "jobs", "job", "dlq", "cron", "instances", "outbox"):
        assert f"js/{page}.js" in names, page


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_script_turns_text_into_markup_or_code(path: Path) -> None:
    text = _text(path)
    for pattern, why in FORBIDDEN_IN_JS:
        found = re.search(pattern, text)
        assert found is None, f"{path.name}: {found and found[0]!r}: {why}"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_only_the_api_module_requests_and_paths_are_relative(path: Path) -> None:
    text = _text(path)
    if path.name != "api.js":
        assert not re.search(r"\b(fetch|XMLHttpRequest|WebSocket|EventSource)\b", text), path.name
    calls = re.findall(r"\b(?:get|post|del|apiUrl|collect)\(\s*([\"'`])(.)", text)
    assert all(first != "/" for _quote, first in calls), f"{path.name}: an absolute API path"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(UI_DIR).as_posix())
def test_nothing_comes_from_elsewhere(path: Path) -> None:
    text = _text(path).replace(_SVG_NAMESPACE, "")
    found = re.search(r"\b[a-z][a-z0-9+.-]*://", text)
    assert found is None, f"{path.name} names another origin: {text[found.start() :][:60]!r}"
    if path.suffix == ".css":
        assert "@import" not in text
        assert "@font-face" not in text
        for url in re.findall(r"url\(\s*[\"']?([^\"')]+)", text):
            assert not url.startswith("/"), url


def test_index_html_has_no_inline_code_and_only_relative_urls() -> None:
    html = _text(INDEX)
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, flags=re.S)
    assert scripts, "index.html loads no script"
    for attrs, body in scripts:
        assert 'src="' in attrs, "a script without src: the CSP refuses inline code"
        assert body.strip() == "", "an inline script: the CSP refuses it"
    assert "<style" not in html
    assert not re.search(r"\sstyle\s*=", html)
    assert not re.search(r"\son[a-z]+\s*=", html)
    for url in re.findall(r"\s(?:href|src)=\"([^\"]*)\"", html):
        assert not url.startswith("/"), f"{url}: the app may be mounted under a prefix"
    assert "<base" not in html  # base-uri 'none'


def _imports(path: Path) -> list[Path]:
    text = _text(path)
    found = re.findall(r"""(?:^|\n)\s*import\s[^;]*?from\s+["'](\.{1,2}/[^"']+)["']""", text)
    found += re.findall(r"""\bimport\(\s*["'](\.{1,2}/[^"']+)["']\s*\)""", text)
    return [(path.parent / rel).resolve() for rel in found]


def test_every_import_exists_and_every_module_is_used() -> None:
    main = (UI_DIR / "js" / "main.js").resolve()
    reached: set[Path] = set()
    todo = [main]
    while todo:
        module = todo.pop()
        if module in reached:
            continue
        reached.add(module)
        for target in _imports(module):
            assert target.is_file(), f"{module.name} imports {target.name}, which is not there"
            todo.append(target)
    unused = sorted(p.name for p in SCRIPTS if p.resolve() not in reached)
    assert unused == [], f"modules main.js never reaches: {unused}"
