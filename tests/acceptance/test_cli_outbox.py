"""``wai outbox ...`` and the outbox line of ``wai queues list``, run as ``python -m wai``."""

from __future__ import annotations

import pytest

import wai
from tests.acceptance.test_cli import run_wai
from tests.acceptance.test_cli_admin import wai_fails, wai_json, wai_ok
from tests.factories import execute


def outbox_row(url: str, job: wai.JobRow, *, failed: bool) -> None:
    """An outbox row of ``job``'s rescue: failed 10 times, or never tried yet."""
    execute(
        url,
        "INSERT INTO wai.outbox (job_id, run_lease, kind, outcome, detail, job, attempts,"
        " last_error, failed_at)"
        " SELECT id, run_lease, kind, 'rescued', '{\"reason\": \"stale_heartbeat\"}', to_jsonb(j),"
        " CASE WHEN %(failed)s THEN 10 ELSE 0 END,"
        " CASE WHEN %(failed)s THEN 'RuntimeError: payment API down' END,"
        " CASE WHEN %(failed)s THEN now() END"
        " FROM wai.jobs AS j WHERE id = %(id)s",
        {"failed": failed, "id": job.id},
    )


@pytest.fixture
def rows(database_url: str, sclient: wai.Client) -> list[wai.OutboxEntry]:
    """Three outbox rows, oldest first: two failed (``charge``), one pending (``resize``)."""
    for kind, failed in (("charge", True), ("charge", True), ("resize", False)):
        outbox_row(database_url, sclient.insert({"n": 1}, kind=kind), failed=failed)
    return sclient.outbox_list()


def test_outbox_list_json_table_filters_and_pages(
    database_url: str, rows: list[wai.OutboxEntry]
) -> None:
    listed = wai_json(database_url, "outbox", "list")
    assert [(e["id"], e["state"], e["kind"]) for e in listed] == [
        (rows[0].id, "failed", "charge"),
        (rows[1].id, "failed", "charge"),
        (rows[2].id, "pending", "resize"),
    ]
    assert listed[0]["attempts"] == 10
    assert listed[0]["last_error"] == "RuntimeError: payment API down"
    assert listed[0]["failed_at"] is not None
    assert listed[0]["detail"] == {"reason": "stale_heartbeat"}

    def ids(*args: str) -> list[int]:
        return [e["id"] for e in wai_json(database_url, "outbox", "list", *args)]

    assert ids("--state", "failed") == [rows[0].id, rows[1].id]
    assert ids("--state", "pending") == [rows[2].id]
    assert ids("--kind", "resize") == [rows[2].id]
    assert ids("--after-id", str(rows[0].id)) == [rows[1].id, rows[2].id]

    result = run_wai("--database-url", database_url, "outbox", "list", "--limit", "2")
    assert result.returncode == 0, result.stderr
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["ID", "STATE", "JOB", "KIND", "OUTCOME", "ATTEMPTS", "NEXT",
                              "ATTEMPT", "CREATED", "ERROR"]  # fmt: skip
    assert len(lines) == 2
    assert lines[0].split()[:6] == [str(rows[0].id), "failed", str(rows[0].job_id), "charge",
                                    "rescued", "10"]  # fmt: skip
    assert "RuntimeError: payment API down" in lines[0]
    assert f"more rows may follow: add --after-id {rows[1].id}" in result.stderr

    result = run_wai("--database-url", database_url, "outbox", "list", "--state", "dead")
    assert result.returncode == 2
    assert "invalid choice: 'dead'" in result.stderr


def test_outbox_stats_and_the_queues_list_line(
    database_url: str, rows: list[wai.OutboxEntry]
) -> None:
    stats = wai_json(database_url, "outbox", "stats")
    assert (stats["pending"], stats["failed"]) == (1, 2)
    assert stats["oldest_pending_at"] is not None
    assert wai_ok(database_url, "outbox", "stats").startswith("outbox: 1 pending (oldest ")
    table = wai_ok(database_url, "queues", "list")
    assert table.splitlines()[-1].startswith("outbox: 1 pending (oldest ")
    assert table.splitlines()[-1].endswith(", 2 failed (see wai outbox list)")
    assert isinstance(wai_json(database_url, "queues", "list"), list)  # the JSON is unchanged


def test_outbox_retry_and_discard(
    database_url: str, sclient: wai.Client, rows: list[wai.OutboxEntry]
) -> None:
    first, second, _pending = rows
    out = wai_ok(database_url, "outbox", "retry", str(first.id))
    assert f"outbox row {first.id} (job {first.job_id}, rescued) retried" in out
    retried = wai_json(database_url, "outbox", "retry", str(first.id))
    assert (retried["state"], retried["attempts"], retried["failed_at"]) == ("pending", 0, None)

    out = wai_ok(database_url, "outbox", "discard", str(second.id))
    assert f"outbox row {second.id} discarded" in out
    assert [e.id for e in sclient.outbox_list()] == [first.id, rows[2].id]
    stats = sclient.outbox_stats()
    assert (stats.pending, stats.failed) == (2, 0)

    err = wai_fails(database_url, "outbox", "discard", str(second.id))
    assert f"no outbox row with id {second.id}" in err
    err = wai_fails(database_url, "outbox", "retry", str(second.id))
    assert f"no outbox row with id {second.id}" in err
    result = run_wai("--database-url", database_url, "outbox", "retry", "1; DROP TABLE x")
    assert result.returncode == 2
    assert "invalid int value" in result.stderr
    assert "positive 64-bit integer" in wai_fails(database_url, "outbox", "discard", "0", status=2)
