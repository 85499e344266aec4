"""Every action of the web UI in a real browser, signed in with the token: confirmed in a
dialog, done, said, and seen in the database; cancelled dialogs change nothing; an action
after the session ended is refused with a readable message.

The module has a database and a server of its own (the page tests read theirs unchanged),
and each test makes the rows it acts on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

import wai
from tests.browser.conftest import (
    TOKEN,
    Seeded,
    Server,
    Ui,
    in_thread,
    open_ui,
    seeded_database,
    start_server,
    stop_server,
)
from tests.conftest import Clones
from tests.integration._helpers import Work, fetch
from tests.integration.test_admin import make
from tests.integration.test_dlq import dead

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

T = TypeVar("T")


@pytest.fixture(scope="module")
def own_database(_clones: Clones) -> Iterator[Seeded]:
    yield from seeded_database(_clones)


@pytest.fixture(scope="module")
def server(own_database: Seeded, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = start_server(own_database, tmp_path_factory.mktemp("serve") / "log", token=TOKEN)
    yield started
    stop_server(started)


@pytest.fixture
def ui(chromium: Any, server: Server) -> Iterator[Ui]:
    """A signed-in page on this module's server."""
    opened = open_ui(chromium, server)
    opened.goto("#/")
    opened.sign_in()
    yield opened
    try:
        opened.check()
    finally:
        opened.page.context.close()


def db(server: Server, fn: Callable[[wai.AsyncClient], Awaitable[T]]) -> T:
    """``fn(client)`` on the server's database (in a thread: Playwright owns this one's loop)."""

    async def run() -> T:
        async with wai.AsyncClient(server.database_url) as client:
            return await fn(client)

    return in_thread(run())


def state_of(server: Server, job_id: int) -> str:
    async def get(client: wai.AsyncClient) -> str:
        return (await client.get_job(job_id)).state.value

    return db(server, get)


def act(ui: Ui, button: str, *, within: str = "#main") -> str:
    """Click an action button, confirm its dialog, wait for the page again; the flash text."""
    renders = ui.renders()
    ui.page.locator(within).locator(f"button[data-action='{button}']").first.click()
    dialog = ui.page.locator("dialog[open]")
    dialog.wait_for()
    ui.confirm()
    ui.wait_render(renders)
    message = ui.page.locator("#flash .flash-message")
    message.wait_for()
    return message.inner_text()


def test_cancel_and_retry_a_job_from_its_page(ui: Ui, server: Server) -> None:
    row = db(server, lambda c: make(c, "running", queue="ui-jobs"))
    ui.navigate(f"#/jobs/{row.id}")
    assert ui.page.is_disabled("button[data-action=retry]")  # a running job: not retryable
    assert f"Job #{row.id} cancelled." in act(ui, "cancel")
    assert state_of(server, row.id) == "cancelled"
    assert "cancelled by operator" in ui.main_text()  # the timeline shows the new entry
    assert ui.page.is_disabled("button[data-action=cancel]")
    assert "available to run again" in act(ui, "retry")
    assert state_of(server, row.id) == "available"
    assert ui.page.locator("h1 + .badge").inner_text() == "available"


def test_a_dismissed_dialog_changes_nothing(ui: Ui, server: Server) -> None:
    row = db(server, lambda c: make(c, "available", queue="ui-jobs"))
    ui.navigate(f"#/jobs/{row.id}")
    ui.page.click("button[data-action=cancel]")
    ui.page.locator("dialog[open]").wait_for()
    assert f"Cancel job #{row.id}?" in ui.page.inner_text("dialog[open] h2")
    ui.page.click("dialog[open] button:has-text('Cancel'):not([data-confirm])")
    ui.page.keyboard.press("Escape")
    assert ui.page.locator("dialog[open]").count() == 0
    assert state_of(server, row.id) == "available"


def test_pause_resume_and_drain_a_queue(ui: Ui, server: Server) -> None:
    async def three(client: wai.AsyncClient) -> None:
        for n in range(3):
            await client.insert(Work(n=n), queue="ui-drain")

    db(server, three)
    ui.navigate("#/queues")
    row = "#main tr:has(a:text-is('ui-drain'))"
    assert "Queue ui-drain paused." in act(ui, "pause", within=row)
    assert "paused" in ui.page.inner_text(row)

    async def paused(client: wai.AsyncClient) -> list[tuple[Any, ...]]:
        return await fetch(client, "SELECT paused FROM wai.queues WHERE name = 'ui-drain'")

    assert db(server, paused) == [(True,)]
    assert "Queue ui-drain resumed." in act(ui, "resume", within=row)
    assert db(server, paused) == [(False,)]
    ui.page.locator(row).locator("button[data-action=drain]").click()
    assert "about 3 now" in ui.page.inner_text("dialog[open]")
    renders = ui.renders()
    ui.confirm()
    ui.wait_render(renders)
    assert "Queue ui-drain drained: 3 jobs cancelled." in ui.page.inner_text("#flash")


def test_dlq_retry_purge_and_bulk_actions_with_their_count(ui: Ui, server: Server) -> None:
    async def entries(client: wai.AsyncClient) -> list[int]:
        return [(await dead(client, queue="ui-dlq", tags=(tag,))).id for tag in "aabbc"]

    a1, a2, b1, b2, c1 = db(server, entries)
    ui.navigate("#/dlq?queue=ui-dlq")
    assert ui.page.locator("#main tbody tr").count() == 5
    row = f"#main tr:has(a:text-is('#{a1}'))"
    assert f"Job #{a1} is back in queue ui-dlq." in act(ui, "retry", within=row)
    assert state_of(server, a1) == "available"

    ui.navigate(f"#/dlq/{c1}")
    renders = ui.renders()
    ui.page.click("button[data-action=purge]")
    ui.confirm()
    ui.wait_render(renders)
    ui.page.wait_for_function("() => location.hash === '#/dlq'", polling=50)
    assert f"Entry #{c1} purged." in ui.page.inner_text("#flash")

    ui.navigate("#/dlq?queue=ui-dlq&tag=b")
    ui.page.click("button[data-action='retry all']")
    dialog = ui.page.locator("dialog[open]")
    dialog.wait_for()
    assert "Retry 2 entries?" in dialog.inner_text()
    assert "matching queue = ui-dlq, tag = b" in dialog.inner_text()
    renders = ui.renders()
    ui.confirm()
    ui.wait_render(renders)
    assert "Retried 2 entries." in ui.page.inner_text("#flash")
    assert {state_of(server, b1), state_of(server, b2)} == {"available"}

    ui.navigate("#/dlq?queue=ui-dlq")
    ui.page.click("button[data-action='purge all']")
    dialog.wait_for()
    assert "Purge 1 entry?" in dialog.inner_text()  # a2 is left
    renders = ui.renders()
    ui.confirm()
    ui.wait_render(renders)
    assert "Purged 1 entry." in ui.page.inner_text("#flash")
    assert "No dead-lettered job matches." in ui.main_text()

    async def depth(client: wai.AsyncClient) -> int:
        return await client.dlq_depth("ui-dlq")

    assert db(server, depth) == 0
    del a2


def test_cron_pause_resume_trigger_and_delete(ui: Ui, server: Server) -> None:
    async def schedule(client: wai.AsyncClient) -> None:
        client.periodic("ui/weekly", "0 9 * * 1", Work(n=9), queue="ui-cron")
        await client.upsert_cron()

    db(server, schedule)
    ui.navigate("#/cron")
    row = "#main tr:has(strong:text-is('ui/weekly'))"
    assert "Schedule ui/weekly paused." in act(ui, "pause", within=row)
    assert "paused" in ui.page.inner_text(row)
    assert "Schedule ui/weekly resumed." in act(ui, "resume", within=row)
    message = act(ui, "trigger", within=row)
    assert "Schedule ui/weekly triggered: job #" in message
    job_id = int(message.split("job #")[1].split()[0])

    async def job(client: wai.AsyncClient) -> tuple[str, str]:
        found = await client.get_job(job_id)
        return found.queue, found.state.value

    assert db(server, job) == ("ui-cron", "available")
    assert "Schedule ui/weekly deleted." in act(ui, "delete", within=row)
    assert ui.page.locator(row).count() == 0


def test_outbox_retry_and_discard(ui: Ui, server: Server) -> None:
    async def owed(client: wai.AsyncClient) -> list[int]:
        ids = []
        for _ in range(2):
            row = await make(client, "running", queue="ui-outbox")
            await client.cancel(row.id)
            [(outbox_id,)] = await fetch(
                client, "SELECT id FROM wai.outbox WHERE job_id = %s", (row.id,)
            )
            ids.append(outbox_id)
        await fetch(
            client,
            "UPDATE wai.outbox SET failed_at = now(), last_error = 'spec missing' WHERE id = %s",
            (ids[0],),
        )
        return ids

    first, second = db(server, owed)
    ui.navigate("#/outbox?state=failed")
    row = f"#main tr:has(td:text-is('#{first}'))"
    assert f"Outbox row #{first} is due again." in act(ui, "retry", within=row)
    ui.navigate("#/outbox?state=pending")
    assert "due now" in ui.page.inner_text(row)
    row2 = f"#main tr:has(td:text-is('#{second}'))"
    assert f"Outbox row #{second} discarded." in act(ui, "discard", within=row2)

    async def rows(client: wai.AsyncClient) -> list[tuple[Any, ...]]:
        return await fetch(
            client,
            "SELECT id, failed_at IS NULL FROM wai.outbox WHERE id IN (%s, %s)",
            (first, second),
        )

    assert db(server, rows) == [(first, True)]


def test_an_action_after_the_session_ended_is_refused_readably(ui: Ui, server: Server) -> None:
    row = db(server, lambda c: make(c, "available", queue="ui-jobs"))
    ui.allow(401, f"/api/v1/jobs/{row.id}/cancel")
    ui.navigate(f"#/jobs/{row.id}")
    # signed out elsewhere (another tab): this page still shows the buttons enabled
    ui.page.evaluate("fetch('api/v1/session', {method: 'DELETE'})")
    ui.page.click("button[data-action=cancel]")
    ui.confirm()
    ui.page.wait_for_selector("#flash .flash-error")
    assert "Cancel failed: you are signed out" in ui.page.inner_text("#flash")
    ui.page.wait_for_selector("#session input[name=token]")
    assert ui.page.is_disabled("button[data-action=cancel]")
    assert state_of(server, row.id) == "available"
