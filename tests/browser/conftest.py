"""Real-browser tests of the web UI: a real ``wai serve`` subprocess, Debian's chromium
driven by Playwright.

- ``seeded`` (session): a database filled by :func:`tests.browser._world.seed`.
- ``token_server`` / ``read_only_server`` (session): ``wai serve`` on it, with
  ``--token-env`` and without.
- ``chromium`` (module): one browser per module. Playwright's sync API marks its
  event loop as running in this thread while it lives, so it must not outlive the
  module: the asyncio tests of other modules may run next in the same worker.
- ``ui`` (function): a fresh browser context on the token server, whose page fails
  the test on any console error, failed request or answer >= 400 not declared
  with :meth:`Ui.allow`, any dialog, and ``window.__xss`` being set.

The browser is ``$WAI_CHROMIUM``, else ``/usr/bin/chromium`` (Debian's package; the
browser download of Playwright is not used). When neither Playwright nor a chromium
is installed the tests are skipped, unless ``WAI_BROWSER_TESTS=required`` (CI sets
it), which makes that an error. ``WAI_UI_SCREENSHOTS=DIR`` saves the screenshots
of docs/ui/ into DIR.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import httpx
import pytest

from tests.browser._world import World, seed
from tests.conftest import Clones, database_url_for

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Dialog, Page, Request, Response

T = TypeVar("T")

TOKEN = "ui-browser-token-7c1e5a90d2"
REQUIRED = os.environ.get("WAI_BROWSER_TESTS") == "required"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def chromium_path() -> str | None:
    """The chromium to drive, or None."""
    for candidate in (
        os.environ.get("WAI_CHROMIUM"),
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def _unavailable(reason: str) -> NoReturn:
    if REQUIRED:
        pytest.fail(f"WAI_BROWSER_TESTS=required, but {reason}")
    pytest.skip(reason)


def in_thread(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion in a thread of its own (its own event loop): this thread's
    loop belongs to Playwright while a browser is open."""
    result: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """A running ``wai serve``."""

    url: str
    database_url: str
    world: World
    token: str | None
    proc: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Seeded:
    """A seeded database."""

    url: str
    world: World


def start_server(seeded: Seeded, log: Path, *, token: str | None) -> Server:
    """``python -m wai --database-url URL serve --port P [--token-env WAI_UI_TOKEN]``."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")}
    args = [sys.executable, "-m", "wai", "--database-url", seeded.url, "serve", "--port", str(port)]
    if token is not None:
        env["WAI_UI_TOKEN"] = token
        args += ["--token-env", "WAI_UI_TOKEN"]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", seeded.url, seeded.world, token, proc, log)
    deadline = time.monotonic() + 30
    with httpx.Client() as http:
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"wai serve exited {proc.returncode}\n{server.output()}")
            try:
                if http.get(server.url + "/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"wai serve never answered\n{server.output()}")
            time.sleep(0.05)
    return server


def stop_server(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(15)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()


def seeded_database(clones: Clones) -> Iterator[Seeded]:
    """A fresh clone of the template, seeded; dropped afterwards."""
    name = clones.take()
    url = database_url_for(name)
    try:
        yield Seeded(url, in_thread(seed(url)))
    finally:
        clones.release(name)


@pytest.fixture(scope="session")
def seeded(_clones: Clones) -> Iterator[Seeded]:
    """The database the page tests read (no test changes it)."""
    yield from seeded_database(_clones)


@pytest.fixture(scope="session")
def token_server(seeded: Seeded, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``wai serve`` on :func:`seeded` with mutations enabled by :data:`TOKEN`."""
    server = start_server(seeded, tmp_path_factory.mktemp("serve") / "log", token=TOKEN)
    yield server
    stop_server(server)


@pytest.fixture(scope="session")
def read_only_server(seeded: Seeded, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``wai serve`` on :func:`seeded` without a token: read-only."""
    server = start_server(seeded, tmp_path_factory.mktemp("serve") / "log", token=None)
    yield server
    stop_server(server)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    """One headless chromium for the module."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[test]')")
    path = chromium_path()
    if path is None:
        _unavailable("no chromium found (apt-get install chromium, or set WAI_CHROMIUM)")
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=path)
        yield browser
        browser.close()
    finally:
        playwright.stop()


@dataclass
class Ui:
    """A page on a server, and every problem it ran into."""

    page: Page
    server: Server
    problems: list[str] = field(default_factory=list)
    allowed: list[tuple[int, str]] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def allow(self, status: int, url_part: str) -> None:
        """Declare an answer with ``status`` to a URL holding ``url_part`` as deliberate."""
        self.allowed.append((status, url_part))

    def goto(self, hash_: str = "#/") -> Page:
        """Open the UI at ``hash_`` and wait until the page is drawn."""
        renders = self.renders()
        target = f"{self.server.url}/{hash_}"
        if self.page.url == target:  # the same hash: no navigation at all, so load it again
            self.page.reload()
            renders = 0
        else:
            self.page.goto(target)
        self.wait_render(renders)
        return self.page

    def renders(self) -> int:
        """How many pages the UI has drawn so far (0 before the UI loads)."""
        try:
            value = self.page.evaluate("document.body ? document.body.dataset.renders : null")
        except Exception:
            return 0
        return int(value or 0)

    def wait_render(self, after: int = 0) -> None:
        """Wait until the UI has drawn a page more than ``after`` pages."""
        self.page.wait_for_function(
            "n => Number(document.body && document.body.dataset.renders || 0) > n",
            arg=after,
            polling=50,
        )

    def navigate(self, hash_: str) -> None:
        """Change the hash (as a click on a link would) and wait for the page."""
        renders = self.renders()
        self.page.evaluate("h => { location.hash = h }", hash_)
        self.wait_render(renders)

    def sign_in(self, token: str = TOKEN) -> None:
        """Sign in with the header's token field."""
        renders = self.renders()
        self.page.fill("#session input[name=token]", token)
        self.page.click("#session button[type=submit]")
        self.page.wait_for_selector("#session >> text=Signed in")
        self.wait_render(renders)

    def confirm(self) -> None:
        """Confirm the open confirmation dialog."""
        self.page.click("dialog[open] button[data-confirm]")

    def main_text(self) -> str:
        return self.page.inner_text("#main")

    def assert_no_overflow(self) -> None:
        """No horizontal page scroll: the document is no wider than the viewport."""
        scroll, inner = self.page.evaluate(
            "[document.documentElement.scrollWidth, window.innerWidth]"
        )
        assert scroll <= inner, f"the page is {scroll}px wide in a {inner}px viewport"

    def screenshot(self, name: str) -> None:
        """Save ``name`` into $WAI_UI_SCREENSHOTS, when set."""
        target = os.environ.get("WAI_UI_SCREENSHOTS")
        if target:
            Path(target).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(target) / name))

    def check(self) -> None:
        """Fail on any problem seen, a dialog, or the hostile markup having run."""
        xss = self.page.evaluate("typeof window.__xss")
        assert xss == "undefined", "hostile markup ran in the page"
        assert self.dialogs == [], f"a dialog opened: {self.dialogs}"
        problems = [p for p in self.problems if not self._deliberate(p)]
        assert problems == [], "\n".join(problems)

    def _deliberate(self, problem: str) -> bool:
        for status, part in self.allowed:
            if problem.startswith(f"HTTP {status} ") and part in problem:
                return True
            if f"status of {status}" in problem and problem.startswith("console"):
                return True
        return False


def open_ui(browser: Browser, server: Server, viewport: dict[str, int] = DESKTOP) -> Ui:
    """A new context and page on ``server``, watched for problems."""
    context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
    page = context.new_page()
    ui = Ui(page, server)

    def on_console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            ui.problems.append(f"console {message.type}: {message.text}")

    def on_failed(request: Request) -> None:
        ui.problems.append(f"request failed: {request.method} {request.url}: {request.failure}")

    def on_response(response: Response) -> None:
        if response.status >= 400:
            ui.problems.append(f"HTTP {response.status} {response.request.method} {response.url}")

    def on_dialog(dialog: Dialog) -> None:
        ui.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("console", on_console)
    page.on("pageerror", lambda error: ui.problems.append(f"page error: {error}"))
    page.on("requestfailed", on_failed)
    page.on("response", on_response)
    page.on("dialog", on_dialog)
    return ui


@pytest.fixture
def ui(chromium: Browser, token_server: Server) -> Iterator[Ui]:
    """A page on the token server, at desktop size, checked at the end of the test."""
    opened = open_ui(chromium, token_server)
    yield opened
    try:
        opened.check()
    finally:
        opened.page.context.close()
