"""Every page of the web UI in a real browser, signed out, on the seeded database: it loads
clean, shows its rows, renders hostile text as text, filters and pages, follows the
lineage, fits a phone, and offers no action until the browser signs in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import httpx
import pytest

from tests.browser._world import XSS_IMG, XSS_SCRIPT, XSS_SVG
from tests.browser.conftest import PHONE, Server, Ui, open_ui

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]

#: (hash, what the main area shows once loaded)
PAGES = [
    ("#/", ["Depth by queue", "Oldest available job", "Live instances", "web-1:4012"]),
    ("#/queues", ["email", "reports", "signup"]),
    ("#/jobs", ["send_welcome", "weekly_report", "newsletter", "resize_image"]),
    ("#/jobs/{chain1}", ["send_welcome", "Lineage", "Attempts"]),
    ("#/callbacks", ["Waiting", "overdue", "Recent timeouts", "#{timed_out}", "retryable"]),
    ("#/dlq", ["billing", "invoice-3", "max_attempts_exhausted", "terminal_error"]),
    ("#/dlq/{dead0}", ["Dead-letter entry", "billing", "Your card was declined."]),
    ("#/cron", ["nightly-report", "cleanup/hourly", "0 3 * * *"]),
    ("#/instances", ["web-1:4012", "web-2:5120", "Registry drift", "welcome_v2"]),
    ("#/outbox", ["weekly_report", "no process holds the spec", "failed"]),
]


def _hash(template: str, server: Server) -> str:
    w = server.world
    return template.format(chain1=w.chain[1], dead0=w.dead[0], timed_out=w.timed_out)


@pytest.mark.parametrize(("template", "expected"), PAGES, ids=[p for p, _ in PAGES])
def test_every_page_loads_clean_with_its_rows(ui: Ui, template: str, expected: list[str]) -> None:
    ui.goto(_hash(template, ui.server))
    text = ui.main_text()
    for snippet in expected:
        snippet = _hash(snippet, ui.server)
        assert snippet in text, f"{template}: {snippet!r} not shown"
    assert "Could not" not in text
    assert ui.page.title().endswith("· wai")
    current = ui.page.locator(".nav a[aria-current=page]")
    assert current.count() == 1


def test_the_queues_page_shows_flow_control(ui: Ui) -> None:
    ui.goto("#/queues")

    def flow(queue: str, part: str) -> str:
        row = ui.page.locator(f"#main tr:has(a:text-is('{queue}'))")
        return row.locator(f"[data-flow={part}]").inner_text()

    assert flow("reports", "rate") == "rate 50 / s · 10.0 of 10 tokens"  # a full bucket
    assert flow("reports", "concurrency") == "2 of 5 running"
    assert flow("images", "keys") == "1 key running · 2 waiting their turn"
    # a line per kind with a rate limit of its own, with its bucket's tokens (full: new)
    assert flow("reports", "kind") == "build_report 5 / 60 s · 2.0 of 2 tokens"
    assert flow("images", "kind") == "resize_image 20 / s · 2.0 of 2 tokens"
    images = ui.page.locator("#main tr:has(a:text-is('images'))")
    assert images.locator("[data-flow=kind]").get_attribute("data-kind") == "resize_image"
    assert images.locator("[data-flow=rate]").count() == 0  # the queue itself has no rate limit
    email = ui.page.locator("#main tr:has(a:text-is('email'))")
    assert email.locator("[data-flow]").count() == 0  # no flow control: a dash


def test_the_dashboard_draws_its_charts_and_refreshes(ui: Ui) -> None:
    ui.goto("#/")
    assert ui.page.locator("svg.chart").count() == 6
    # An hour of throughput: three lines of 60 points; an hour of depth: a line per state.
    throughput = ui.page.locator("svg.chart").first
    assert throughput.locator("polyline.stroke-event-completed").count() == 1
    points = throughput.locator("polyline.stroke-event-completed").get_attribute("points")
    assert points is not None
    assert len(points.split()) == 60
    assert ui.page.locator("polyline.stroke-state-available").count() == 1
    assert ui.page.locator("polyline.stroke-lag").count() == 1
    assert "completed (" in (ui.page.text_content(".legend") or "")
    bars = ui.page.locator("svg.chart rect.fill-state-available")
    assert bars.count() >= 2  # email and q have available jobs
    assert ui.page.locator(".card").count() == 6
    assert "Dead letters" in (ui.page.text_content(".cards") or "")
    note = ui.page.inner_text(".refresh-note")
    assert "refreshes every 5 s" in note
    ui.page.wait_for_function(
        "before => document.querySelector('.refresh-note').textContent !== before",
        arg=note,
        timeout=8000,
        polling=200,
    )


def test_the_dashboard_pauses_while_the_tab_is_hidden(ui: Ui) -> None:
    ui.goto("#/")
    note = ui.page.inner_text(".refresh-note")
    ui.page.evaluate(
        "Object.defineProperty(document, 'hidden', {configurable: true, get: () => true})"
    )
    ui.page.wait_for_timeout(5600)  # a refresh was due: it did not happen
    assert ui.page.inner_text(".refresh-note") == note
    ui.page.evaluate(
        "Object.defineProperty(document, 'hidden', {configurable: true, get: () => false}),"
        " document.dispatchEvent(new Event('visibilitychange'))"
    )
    ui.page.wait_for_function(  # visible again: it refreshes at once
        "before => document.querySelector('.refresh-note').textContent !== before",
        arg=note,
        timeout=2000,
        polling=50,
    )


def test_hostile_text_shows_as_text_everywhere(ui: Ui) -> None:
    w = ui.server.world
    for target, shown in [
        (f"#/jobs/{w.chain[3]}", [f"no process holds the spec {XSS_IMG}"]),
        (f"#/jobs/{w.xss_job}", [XSS_IMG, XSS_SCRIPT, XSS_SVG, "ValueError: bad template"]),
        ("#/jobs", [XSS_IMG]),
        ("#/queues", [XSS_SCRIPT]),
        ("#/", [XSS_SCRIPT]),
        (f"#/dlq/{w.xss_dead}", ["ValueError: bad template", XSS_SCRIPT]),
        ("#/cron", [XSS_SCRIPT, XSS_IMG[:20]]),  # the kind, clipped in the table
        ("#/outbox", ["Traceback (most recent call last):"]),
        ("#/callbacks", [XSS_IMG[:20]]),  # the kind, clipped in the table
    ]:
        ui.goto(target)
        if target.startswith("#/jobs/"):  # the lineage comes in after the page
            ui.page.wait_for_function(
                "() => !document.querySelector('.lineage').textContent.includes('Loading')",
                polling=50,
            )
        text = ui.main_text()
        for snippet in shown:
            assert snippet in text, f"{target}: {snippet!r} is not shown as text"
        # no element was made from the data: only the UI's own tags are in the page
        assert ui.page.locator("#main img, #main script, #main iframe").count() == 0
        assert ui.page.evaluate("typeof window.__xss") == "undefined"
    # the hostile kind and tag travel through the URL and the form as data, too
    ui.navigate("#/jobs?" + urlencode({"tag": XSS_SCRIPT, "kind": XSS_IMG}))
    assert ui.page.input_value("#filter-kind") == XSS_IMG
    assert ui.page.locator("#main tbody tr").count() == 1
    assert f"#{w.xss_job}" in ui.main_text()


def test_jobs_filters_are_reflected_in_the_hash(ui: Ui) -> None:
    ui.goto("#/jobs")
    page = ui.page
    page.select_option("#filter-state", "failed")
    page.fill("#filter-queue", "reports")
    renders = ui.renders()
    page.click("form.filters button[type=submit]")
    ui.wait_render(renders)
    assert page.evaluate("location.hash") == "#/jobs?state=failed&queue=reports"
    rows = page.locator("#main tbody tr")
    assert rows.count() == 1
    assert "failed" in rows.first.inner_text()
    assert "filtered by state = failed, queue = reports" in ui.main_text()

    ui.goto("#/jobs?tag=newsletter")  # a deep link fills the form
    assert page.input_value("#filter-tag") == "newsletter"
    assert page.locator("#main tbody tr").count() == 14
    ui.goto(f"#/jobs?trigger_job_id={ui.server.world.chain[1]}")
    ids = page.locator("#main tbody td:first-child").all_inner_texts()
    assert ids == [f"#{ui.server.world.sibling}", f"#{ui.server.world.chain[2]}"]
    renders = ui.renders()
    page.click("form.filters button:has-text('Clear')")
    ui.wait_render(renders)
    assert page.evaluate("location.hash") == "#/jobs"
    ui.goto("#/jobs?state=nope")
    assert "state must be one of" in ui.main_text()  # the API's message, readable
    ui.allow(400, "/api/v1/jobs?state=nope")


def test_jobs_search_and_time_range_are_reflected_in_the_hash(ui: Ui) -> None:
    ui.goto("#/jobs")
    page = ui.page

    def submit() -> None:
        renders = ui.renders()
        page.click("form.filters button[type=submit]")
        ui.wait_render(renders)

    def kinds() -> list[str]:
        return page.locator("#main tbody td:nth-child(2)").all_inner_texts()

    page.fill("#filter-search", "  SEND_e ")
    submit()
    assert page.evaluate("location.hash") == "#/jobs?search=SEND_e"
    assert kinds()
    assert set(kinds()) == {"send_email"}
    assert "filtered by search = SEND_e" in ui.main_text()
    assert "null" not in ui.main_text()  # no absent element shown as text

    assert page.is_hidden("#filter-created_after")
    page.select_option("#filter-range", "1h")
    submit()
    assert page.evaluate("location.hash") == "#/jobs?search=SEND_e&since=1h"
    assert "created in the last hour" in ui.main_text()
    with httpx.Client(base_url=ui.server.url) as http:  # what the API holds for the last hour
        since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
        params = {"search": "SEND_e", "created_after": since}
        expected = [f"#{j['id']}" for j in http.get("/api/v1/jobs", params=params).json()["items"]]
    shown = page.locator("#main tbody td:first-child").all_inner_texts()
    assert shown
    assert shown == expected or shown == expected[1:]  # one may age out between the two

    page.select_option("#filter-range", "custom")
    assert page.is_visible("#filter-created_after")
    page.fill("#filter-created_after", "2020-01-01T00:00")
    page.fill("#filter-created_before", "2021-01-01T00:00")
    submit()
    hash_ = page.evaluate("location.hash")
    assert "created_after=2020-01-0" in hash_  # the local time, in UTC
    assert "created_before=202" in hash_
    assert "since" not in hash_
    assert "No job matches these filters." in ui.main_text()
    assert page.input_value("#filter-created_after") == "2020-01-01T00:00"  # read back local

    failed = ui.server.world.by_state["failed"]
    ui.goto(f"#/jobs?search=%23{failed}&since=24h")  # a deep link fills the form
    assert page.input_value("#filter-search") == f"#{failed}"
    assert page.input_value("#filter-range") == "24h"
    assert f"#{failed}" in page.locator("#main tbody td:first-child").all_inner_texts()
    renders = ui.renders()
    page.click(f"#main .notice a:text-is('open job #{failed}')")
    ui.wait_render(renders)
    assert page.evaluate("location.hash") == f"#/jobs/{failed}"


def test_the_callbacks_page_lists_waiting_jobs_and_timeouts_with_links(ui: Ui) -> None:
    w = ui.server.world
    ui.goto("#/callbacks")
    page = ui.page
    waiting = page.locator("section:has(h2:text-is('Waiting')) tbody tr")
    ids = [t.strip() for t in waiting.locator("td:first-child").all_inner_texts()]
    assert ids[0] == f"#{w.overdue}"  # the soonest timeout: it passed
    assert f"#{w.by_state['waiting_external']}" in ids
    assert "overdue" in waiting.first.inner_text()
    assert "row-flagged" in (waiting.first.get_attribute("class") or "")
    assert waiting.last.locator("td:nth-child(4)").inner_text().startswith("in ")  # ahead
    timeouts = page.locator("section:has(h2:text-is('Recent timeouts')) tbody tr")
    assert timeouts.count() == 1
    assert "min ago" in timeouts.first.locator("td:nth-child(4)").inner_text()
    renders = ui.renders()
    timeouts.first.locator(f"a:text-is('#{w.timed_out}')").click()
    ui.wait_render(renders)
    assert page.evaluate("location.hash") == f"#/jobs/{w.timed_out}"
    assert "callback timed out" in ui.main_text()

    ui.goto("#/callbacks?queue=q")  # the filters are in the hash, and fill the form
    assert page.input_value("#callbacks-queue") == "q"
    ids = [t.strip() for t in waiting.locator("td:first-child").all_inner_texts()]
    assert ids == [f"#{w.by_state['waiting_external']}"]
    assert "No recent callback timeout." in ui.main_text()


def test_jobs_pages_forward_and_back(ui: Ui) -> None:
    email = list(reversed(ui.server.world.email_ids))  # newest first, 14 of them
    ui.goto("#/jobs?tag=newsletter&limit=5")
    page = ui.page

    def shown() -> list[str]:
        return page.locator("#main tbody td:first-child").all_inner_texts()

    def click(which: str) -> None:
        renders = ui.renders()
        page.click(f"button[data-pager={which}]")
        ui.wait_render(renders)

    assert shown() == [f"#{i}" for i in email[:5]]
    assert page.is_disabled("button[data-pager=previous]")
    click("next")
    assert shown() == [f"#{i}" for i in email[5:10]]
    assert f"before_id={email[4]}" in page.evaluate("location.hash")
    click("next")
    assert shown() == [f"#{i}" for i in email[10:]]
    assert page.is_disabled("button[data-pager=next]")
    assert "Page 3" in ui.main_text()
    click("previous")
    assert shown() == [f"#{i}" for i in email[5:10]]
    click("previous")
    assert shown() == [f"#{i}" for i in email[:5]]
    renders = ui.renders()
    page.go_back()  # the browser's own history agrees
    ui.wait_render(renders)
    assert f"before_id={email[4]}" in page.evaluate("location.hash")
    assert shown() == [f"#{i}" for i in email[5:10]]


def test_the_lineage_tree_navigates_both_ways(ui: Ui) -> None:
    root, child, grandchild, great = ui.server.world.chain
    sibling = ui.server.world.sibling
    page = ui.page
    ui.goto(f"#/jobs/{child}")
    tree = page.locator(".lineage")
    tree.locator(".lineage-node").first.wait_for()
    current = tree.locator(".lineage-current")
    assert current.get_attribute("data-job-id") == str(child)
    assert "send_welcome" in current.inner_text()
    assert "completed → welcome" in current.inner_text()
    nodes = tree.locator(".lineage-node").evaluate_all("ns => ns.map(n => n.dataset.jobId)")
    assert nodes == [str(i) for i in (root, child, grandchild, great, sibling)]
    # the follow-up below, nested under its parent, with the outbox row it owes
    great_node = tree.locator(f".lineage-node[data-job-id='{great}']")
    assert "owed: pending" in great_node.inner_text()
    assert "3 attempts" in great_node.inner_text()
    assert tree.locator(f"li:has(> .lineage-node[data-job-id='{grandchild}']) .tree").count() == 1

    renders = ui.renders()
    tree.locator(f".lineage-node[data-job-id='{grandchild}'] a").first.click()
    ui.wait_render(renders)
    assert page.evaluate("location.hash") == f"#/jobs/{grandchild}"
    tree.locator(".lineage-current").wait_for()
    assert tree.locator(".lineage-current").get_attribute("data-job-id") == str(grandchild)

    renders = ui.renders()
    tree.locator(f".lineage-node[data-job-id='{root}'] a").click()  # an ancestor, above
    ui.wait_render(renders)
    assert page.evaluate("location.hash") == f"#/jobs/{root}"
    tree.locator(".lineage-current").wait_for()
    assert tree.locator(".lineage-current").get_attribute("data-job-id") == str(root)


def test_a_job_without_lineage_says_so(ui: Ui) -> None:
    ui.goto(f"#/jobs/{ui.server.world.by_state['available']}")
    ui.page.wait_for_selector(".lineage >> text=stands alone")


def test_unknown_things_are_readable_errors_not_blank_pages(ui: Ui) -> None:
    ui.goto("#/jobs/999999999")
    assert "Could not load this job" in ui.main_text()
    assert "no job with id 999999999" in ui.main_text().lower() or "999999999" in ui.main_text()
    ui.allow(404, "/api/v1/jobs/999999999")
    ui.goto(f"#/jobs/{ui.server.world.dead[1]}")
    assert "dead-letter" in ui.main_text()
    ui.page.click(f"a[href='#/dlq/{ui.server.world.dead[1]}']")
    ui.allow(404, f"/api/v1/jobs/{ui.server.world.dead[1]}")
    ui.page.wait_for_selector("h1 >> text=Dead-letter entry")
    ui.goto("#/nowhere/at/all")
    assert "there is no page at" in ui.main_text()
    ui.goto("#/jobs/abc")
    assert "is not a job id" in ui.main_text()


def test_signed_out_every_action_is_disabled_with_the_reason(ui: Ui) -> None:
    w = ui.server.world
    for target in ["#/queues", f"#/jobs/{w.by_state['running']}", "#/dlq", "#/cron", "#/outbox"]:
        ui.goto(target)
        assert "Sign in with the admin token to use actions." in ui.main_text()
        buttons = ui.page.locator("#main button[data-action]")
        assert buttons.count() > 0, target
        for i in range(buttons.count()):
            assert buttons.nth(i).is_disabled(), target
            assert "Sign in" in (buttons.nth(i).get_attribute("title") or "")
    assert ui.page.locator("#session input[name=token]").is_visible()


def test_signing_in_enables_the_actions_and_signing_out_disables_them(ui: Ui) -> None:
    ui.goto("#/queues")
    page = ui.page
    ui.page.fill("#session input[name=token]", "not-the-token")
    page.click("#session button[type=submit]")
    page.wait_for_selector("#session >> text=Wrong token.")
    ui.allow(401, "/api/v1/session")
    ui.sign_in()
    assert page.locator("#main button[data-action=pause]").first.is_enabled()
    assert "Sign in with the admin token" not in ui.main_text()
    renders = ui.renders()
    page.click("#session button:has-text('Sign out')")
    ui.wait_render(renders)
    page.wait_for_selector("#session input[name=token]")
    assert page.locator("#main button[data-action=pause]").first.is_disabled()
    cookies = page.context.cookies()
    assert [c.get("name") for c in cookies if c.get("value")] == []


@pytest.mark.parametrize(("template", "_expected"), PAGES, ids=[p for p, _ in PAGES])
def test_a_phone_has_no_horizontal_scroll(
    chromium: object, token_server: Server, template: str, _expected: list[str]
) -> None:
    phone = open_ui(chromium, token_server, PHONE)  # type: ignore[arg-type]
    try:
        phone.goto(_hash(template, token_server))
        phone.assert_no_overflow()
        # wide tables scroll inside their own box
        for box in phone.page.locator(".table-wrap").all():
            assert box.evaluate("b => getComputedStyle(b).overflowX") == "auto"
        phone.check()
    finally:
        phone.page.context.close()


def test_the_page_carries_its_security_headers(ui: Ui) -> None:
    response = ui.page.goto(ui.server.url + "/")
    assert response is not None
    headers = response.headers
    assert headers["content-security-policy"].startswith("default-src 'none'; script-src 'self'")
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-content-type-options"] == "nosniff"
    ui.wait_render()


def test_read_only_shows_no_sign_in_and_disables_every_action(
    chromium: object, read_only_server: Server
) -> None:
    ro = open_ui(chromium, read_only_server)  # type: ignore[arg-type]
    try:
        w = read_only_server.world
        for target in ["#/queues", f"#/jobs/{w.by_state['running']}", "#/dlq", "#/cron"]:
            ro.goto(target)
            assert ro.page.inner_text("#session") == "Read-only"
            assert ro.page.locator("#session input").count() == 0
            assert "This admin API is read-only" in ro.main_text()
            buttons = ro.page.locator("#main button[data-action]")
            assert buttons.count() > 0
            for i in range(buttons.count()):
                assert buttons.nth(i).is_disabled()
                assert "--token-env" in (buttons.nth(i).get_attribute("title") or "")
        ro.check()
    finally:
        ro.page.context.close()
