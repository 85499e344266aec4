"""The pictures of docs/ui/: the dashboard, the jobs, a job with its lineage, the dead
letters, the callbacks, on a database without the hostile rows, at 1280 x 800. Saved only when
``WAI_UI_SCREENSHOTS`` names a directory; the pages are checked either way.

    WAI_UI_SCREENSHOTS=docs/ui python -m pytest tests/browser/test_ui_screenshots.py
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser._world import seed
from tests.browser.conftest import (
    TOKEN,
    Seeded,
    Server,
    in_thread,
    open_ui,
    start_server,
    stop_server,
)
from tests.conftest import Clones, database_url_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def server(_clones: Clones, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    name = _clones.take()
    url = database_url_for(name)
    try:
        seeded = Seeded(url, in_thread(seed(url, hostile=False)))
        started = start_server(seeded, tmp_path_factory.mktemp("serve") / "log", token=TOKEN)
        try:
            yield started
        finally:
            stop_server(started)
    finally:
        _clones.release(name)


def test_screenshots(chromium: Any, server: Server) -> None:
    ui = open_ui(chromium, server)
    try:
        ui.goto("#/")
        ui.sign_in()  # the pictures show the actions enabled
        for target, name, ready in [
            ("#/", "dashboard.png", "svg.chart"),
            ("#/jobs", "jobs.png", "#main tbody tr"),
            (f"#/jobs/{server.world.chain[1]}", "job-lineage.png", ".lineage-current"),
            ("#/dlq", "dlq.png", "#main tbody tr"),
            ("#/callbacks", "callbacks.png", "#main tbody tr"),
        ]:
            ui.goto(target)
            ui.page.locator(ready).first.wait_for()
            assert "Could not" not in ui.main_text()
            ui.assert_no_overflow()
            ui.screenshot(name)
        ui.check()
    finally:
        ui.page.context.close()
