"""``wai dlq ...`` and ``wai cron ...``, run as ``python -m wai`` in a subprocess."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

import wai
from tests.acceptance.test_cli import run_wai
from tests.acceptance.test_cli_admin import wai_fails, wai_json, wai_ok
from tests.factories import HOSTILE, execute, set_state
from wai.cli._common import ProgressBar

ERRORS = (
    '[{"error": "SMTPError: mailbox full\\n  File \\"send.py\\", line 3", "attempt": 1,'
    ' "at": "2024-01-01T00:00:00Z"}]'
)


def dead_letter(
    client: wai.Client, url: str, *, args: Any = None, reason: str = "manual", **insert: Any
) -> int:
    """Insert a job, force it ``failed`` with one error, move it to the DLQ; its id."""
    options: dict[str, Any] = {"kind": "send_email", "queue": "mail", **insert}
    job = client.insert(args if args is not None else {"to": "a"}, **options)
    set_state(url, job.id, "failed")
    execute(url, "UPDATE wai.jobs SET errors = %s::jsonb WHERE id = %s", (ERRORS, job.id))
    client.move_to_dlq(job.id, reason)
    return job.id


@pytest.fixture
def dead(database_url: str, sclient: wai.Client) -> list[int]:
    """Four entries, oldest first: three ``send_email`` on ``mail`` (one tagged), one ``resize``."""
    return [
        dead_letter(sclient, database_url, reason="terminal_error"),
        dead_letter(sclient, database_url, tags=["vip"]),
        dead_letter(sclient, database_url),
        dead_letter(sclient, database_url, kind="resize", queue="img"),
    ]


def dlq_rows(url: str) -> int:
    """Rows in ``wai.dlq``, on a connection of its own."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM wai.dlq").fetchone()
    assert row is not None
    return int(row[0])


def dlq_ids(client: wai.Client) -> list[int]:
    return sorted(e.job.id for e in client.list_dlq())


def run_wai_tty(url: str, *args: str, answer: str, timeout: float = 30) -> tuple[int, str]:
    """Run ``wai`` with a terminal as stdin/stdout/stderr, typing ``answer``; (status, output)."""
    master, slave = pty.openpty()
    base = {k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "wai", "--database-url", url, *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=base,
        close_fds=True,
    )
    os.close(slave)
    os.write(master, answer.encode())
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 4096)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        status = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return status, b"".join(chunks).decode()


# -- dlq list / show / depth ----------------------------------------------------------------


def test_dlq_list_json_newest_first_with_every_field(database_url: str, dead: list[int]) -> None:
    listed = wai_json(database_url, "dlq", "list")
    assert [e["job"]["id"] for e in listed] == list(reversed(dead))
    oldest = listed[-1]
    assert oldest["reason"] == "terminal_error"
    assert datetime.fromisoformat(oldest["dlq_at"]).tzinfo is not None
    assert oldest["cursor"].endswith(f"/{dead[0]}")
    assert oldest["job"]["state"] == "failed"
    assert oldest["job"]["args"] == {"to": "a"}
    assert oldest["job"]["errors"][0]["error"].startswith("SMTPError: mailbox full\n")


def test_dlq_list_filters(database_url: str, dead: list[int]) -> None:
    def ids(*args: str) -> list[int]:
        return [e["job"]["id"] for e in wai_json(database_url, "dlq", "list", *args)]

    assert ids("--queue", "mail") == [dead[2], dead[1], dead[0]]
    assert ids("--kind", "resize") == [dead[3]]
    assert ids("--tag", "vip") == [dead[1]]
    assert ids("--reason", "terminal_error") == [dead[0]]
    assert ids("--queue", "img", "--kind", "send_email") == []
    assert ids("--kind", HOSTILE) == []  # data, not SQL
    assert "invalid queue name" in wai_fails(database_url, "dlq", "list", "--queue", HOSTILE,
                                             status=2)  # fmt: skip


def test_dlq_list_table_and_paging(database_url: str, dead: list[int]) -> None:
    result = run_wai("--database-url", database_url, "dlq", "list", "--limit", "2")
    assert result.returncode == 0, result.stderr
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["JOB", "ID", "KIND", "QUEUE", "REASON", "DLQ", "AT", "ATTEMPT",
                              "LAST", "ERROR"]  # fmt: skip
    assert [line.split()[0] for line in lines] == [str(dead[3]), str(dead[2])]
    assert "resize" in lines[0]
    assert "manual" in lines[0]
    assert lines[0].endswith("SMTPError: mailbox full")  # the first line of the last error
    assert "more entries may follow: add --before " in result.stderr
    cursor = result.stderr.split("--before ")[1].split()[0]

    page2 = wai_json(database_url, "dlq", "list", "--limit", "2", "--before", cursor)
    assert [e["job"]["id"] for e in page2] == [dead[1], dead[0]]
    page3 = wai_json(database_url, "dlq", "list", "--limit", "2", "--before", page2[-1]["cursor"])
    assert page3 == []

    full = run_wai("--database-url", database_url, "dlq", "list", "--limit", "5")
    assert "more entries" not in full.stderr
    err = wai_fails(database_url, "dlq", "list", "--before", "yesterday/1", status=2)
    assert "invalid dead-letter cursor" in err


def test_dlq_show(database_url: str, dead: list[int]) -> None:
    shown = wai_json(database_url, "dlq", "show", str(dead[1]))
    assert shown["job"]["id"] == dead[1]
    assert shown["job"]["tags"] == ["vip"]
    assert shown["reason"] == "manual"
    assert shown["cursor"].endswith(f"/{dead[1]}")

    text = wai_ok(database_url, "dlq", "show", str(dead[0]))
    for expected in ("dlq reason:", "terminal_error", "dlq at:", "state:", "failed", "errors (1):",
                     "SMTPError: mailbox full", 'File "send.py", line 3'):  # fmt: skip
        assert expected in text, expected


def test_dlq_show_unknown_and_bad_ids(database_url: str, dead: list[int]) -> None:
    err = wai_fails(database_url, "dlq", "show", "424242")
    assert err == "wai: error: job 424242 is not in the dead-letter queue\n"
    result = run_wai("--database-url", database_url, "dlq", "show", "5 OR 1=1")
    assert result.returncode == 2
    assert "invalid int value" in result.stderr
    assert "Traceback" not in result.stderr


def test_dlq_depth(database_url: str, dead: list[int]) -> None:
    assert wai_json(database_url, "dlq", "depth") == {"queues": {"img": 1, "mail": 3}, "total": 4}
    header, *lines = wai_ok(database_url, "dlq", "depth").splitlines()
    assert header.split() == ["QUEUE", "DEPTH"]
    assert [line.split() for line in lines] == [["img", "1"], ["mail", "3"], ["(total)", "4"]]


def test_dlq_depth_when_empty(database_url: str) -> None:
    assert wai_json(database_url, "dlq", "depth") == {"queues": {}, "total": 0}
    assert wai_json(database_url, "dlq", "list") == []


# -- dlq retry ------------------------------------------------------------------------------


def test_dlq_retry_one(database_url: str, sclient: wai.Client, dead: list[int]) -> None:
    out = wai_ok(database_url, "dlq", "retry", str(dead[0]))
    assert f"job {dead[0]} retried from the dead-letter queue: available now on queue 'mail'" in out
    row = sclient.get_job(dead[0])
    assert row.state == wai.JobState.AVAILABLE
    assert row.attempt == 0
    assert len(row.errors) == 1  # kept

    err = wai_fails(database_url, "dlq", "retry", str(dead[0]))
    assert f"job {dead[0]} is not in the dead-letter queue" in err


def test_dlq_retry_one_to_another_queue_priority_and_time(
    database_url: str, sclient: wai.Client, dead: list[int]
) -> None:
    row = wai_json(database_url, "dlq", "retry", str(dead[1]), "--queue", "mail_slow",
                   "--priority", "4", "--run-at", "2099-01-01T12:00:00+02:00")  # fmt: skip
    assert row["id"] == dead[1]
    assert row["queue"] == "mail_slow"
    assert row["priority"] == 4
    assert row["state"] == "scheduled"
    assert datetime.fromisoformat(row["run_at"]) == datetime(2099, 1, 1, 10, tzinfo=UTC)

    out = wai_ok(database_url, "dlq", "retry", str(dead[2]), "--to-queue", "other",
                 "--run-at", "2099-01-01T00:00:00Z")  # fmt: skip
    assert "scheduled for 2099-01-01 00:00:00Z on queue 'other'" in out
    assert dlq_ids(sclient) == [dead[0], dead[3]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["abc"], "invalid int value: 'abc'"),
        (["1", "--priority", "9"], "argument --priority: must be 1..4, got '9'"),
        (["1", "--priority", "high"], "argument --priority: not a priority: 'high'"),
        (["1", "--run-at", "next tuesday"], "not an ISO 8601 date and time"),
        (["1", "--run-at", "2099-01-01T00:00:00"], "has no UTC offset"),
        (["1", "--run-at", "2099-13-01T00:00:00Z"], "not an ISO 8601 date and time"),
        (["--all", "--batch-size", "0"], "argument --batch-size: must be 1..10000"),
    ],
)
def test_dlq_retry_rejects_hostile_input(
    database_url: str, sclient: wai.Client, dead: list[int], args: list[str], message: str
) -> None:
    result = run_wai("--database-url", database_url, "dlq", "retry", *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert dlq_ids(sclient) == dead


def test_dlq_retry_one_rejects_bulk_options(
    database_url: str, sclient: wai.Client, dead: list[int]
) -> None:
    err = wai_fails(database_url, "dlq", "retry", str(dead[0]), "--kind", "x", status=2)
    assert "dlq retry ID takes no filter and no --all" in err
    err = wai_fails(database_url, "dlq", "retry", str(dead[0]), "--queue", "a", "--to-queue", "b",
                    status=2)  # fmt: skip
    assert "give the target queue once" in err
    err = wai_fails(database_url, "dlq", "retry", str(dead[0]), "--queue", HOSTILE, status=2)
    assert "invalid queue name" in err
    assert dlq_ids(sclient) == dead


def test_dlq_bulk_retry_with_a_filter_shows_progress(
    database_url: str, sclient: wai.Client, dead: list[int]
) -> None:
    result = run_wai("--database-url", database_url, "dlq", "retry", "--queue", "mail",
                     "--to-queue", "mail_again", "--priority", "1",
                     "--batch-size", "2")  # fmt: skip
    assert result.returncode == 0, result.stderr
    # stderr is a pipe here: one plain line per batch, the total counted first.
    assert result.stderr.splitlines() == ["wai: retrying: 2/3 (66%)", "wai: retrying: 3/3 (100%)"]
    assert "\r" not in result.stderr
    assert result.stdout == "retried 3 of 3 matching entries onto queue 'mail_again'\n"
    assert dlq_ids(sclient) == [dead[3]]
    for job_id in dead[:3]:
        row = sclient.get_job(job_id)
        assert (row.state, row.queue, row.priority) == (wai.JobState.AVAILABLE, "mail_again", 1)


def test_dlq_bulk_retry_json_and_nothing_matching(
    database_url: str, sclient: wai.Client, dead: list[int]
) -> None:
    assert wai_json(database_url, "dlq", "retry", "--tag", "vip") == {"retried": 1}
    assert wai_json(database_url, "dlq", "retry", "--tag", "vip") == {"retried": 0}
    out = wai_ok(database_url, "dlq", "retry", "--kind", "nope")
    assert "no dead-letter entry matches (kind 'nope'): nothing retried" in out
    assert wai_json(database_url, "dlq", "retry", "--all") == {"retried": 3}
    assert dlq_ids(sclient) == []


def test_dlq_bulk_retry_reports_entries_a_unique_key_holds(
    database_url: str, sclient: wai.Client
) -> None:
    unique = wai.UniqueOpts()
    held = dead_letter(sclient, database_url, args={"to": "u"}, unique=unique)
    free = dead_letter(sclient, database_url)
    live = sclient.insert({"to": "u"}, kind="send_email", queue="mail", unique=unique)

    out = wai_ok(database_url, "dlq", "retry", "--queue", "mail")
    assert "retried 1 of 2 matching entries; 1 not retried (a live job holds its unique key" in out
    assert dlq_ids(sclient) == [held]
    assert sclient.get_job(free).state == wai.JobState.AVAILABLE
    err = wai_fails(database_url, "dlq", "retry", str(held))
    assert "a live job holds its unique key" in err
    assert sclient.get_job(live.id).state == wai.JobState.AVAILABLE


def test_dlq_bulk_retry_refuses_without_a_filter_or_all(
    database_url: str, sclient: wai.Client, dead: list[int]
) -> None:
    err = wai_fails(database_url, "dlq", "retry", status=2)
    assert "dlq retry needs a job ID, a filter" in err
    assert "nothing was done" in err
    err = wai_fails(database_url, "dlq", "retry", "--all", "--kind", "resize", status=2)
    assert "--all covers every entry" in err
    assert dlq_ids(sclient) == dead


# -- dlq purge ------------------------------------------------------------------------------


def test_dlq_purge_one(database_url: str, sclient: wai.Client, dead: list[int]) -> None:
    assert wai_ok(database_url, "dlq", "purge", str(dead[0])) == (
        f"job {dead[0]} purged from the dead-letter queue\n"
    )
    assert wai_json(database_url, "dlq", "purge", str(dead[1])) == {"purged": 1}
    err = wai_fails(database_url, "dlq", "purge", str(dead[0]))
    assert f"job {dead[0]} is not in the dead-letter queue" in err
    assert "no job with id 0" in wai_fails(database_url, "dlq", "purge", "0")
    assert dlq_ids(sclient) == dead[2:]
    with pytest.raises(wai.JobNotFound):
        sclient.get_job(dead[0])  # gone for good


def test_dlq_bulk_purge_refuses_without_a_filter_and_deletes_nothing(
    database_url: str, sclient: wai.Client, dead: list[int]
) -> None:
    for extra in ([], ["--yes"], ["--json"], ["--batch-size", "1", "--yes"]):
        err = wai_fails(database_url, "dlq", "purge", *extra, status=2)
        assert (
            "dlq purge needs a job ID, a filter (--queue, --kind, --tag, --reason) or --all" in err
        )
    err = wai_fails(database_url, "dlq", "purge", str(dead[0]), "--all", "--yes", status=2)
    assert "dlq purge ID takes no filter and no --all" in err
    assert dlq_ids(sclient) == dead
    assert dlq_rows(database_url) == 4


def test_dlq_bulk_purge_needs_yes_without_a_terminal(
    database_url: str, sclient: wai.Client, dead: list[int]
) -> None:
    err = wai_fails(database_url, "dlq", "purge", "--queue", "mail", status=2)
    assert "not confirmed: pass --yes to purge 3 dead-letter entries for good (queue 'mail')" in err
    assert dlq_ids(sclient) == dead

    result = run_wai("--database-url", database_url, "dlq", "purge", "--queue", "mail", "--yes",
                     "--batch-size", "2")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == ["wai: purging: 2/3 (66%)", "wai: purging: 3/3 (100%)"]
    assert result.stdout == "purged 3 dead-letter entries\n"
    assert dlq_ids(sclient) == [dead[3]]
    assert wai_json(database_url, "dlq", "purge", "--all", "--yes") == {"purged": 1}
    assert wai_json(database_url, "dlq", "purge", "--all") == {"purged": 0}  # nothing to confirm
    assert dlq_rows(database_url) == 0


def test_dlq_bulk_purge_asks_on_a_terminal(
    database_url: str, sclient: wai.Client, dead: list[int]
) -> None:
    status, output = run_wai_tty(database_url, "dlq", "purge", "--kind", "send_email", answer="n\n")
    assert status == 1, output
    assert "purge 3 dead-letter entries for good (kind 'send_email')? [y/N]" in output
    assert "aborted: nothing purged" in output
    assert dlq_ids(sclient) == dead

    status, output = run_wai_tty(database_url, "dlq", "purge", "--kind", "send_email",
                                 "--batch-size", "2", answer="y\n")  # fmt: skip
    assert status == 0, output
    assert "\rwai: purging [####################----------] 2/3  66%" in output
    assert "\rwai: purging [##############################] 3/3 100%" in output
    assert "purged 3 dead-letter entries" in output
    assert dlq_ids(sclient) == [dead[3]]


# -- dlq move -------------------------------------------------------------------------------


def test_dlq_move(database_url: str, sclient: wai.Client) -> None:
    failed = sclient.insert({"to": "a"}, kind="send_email", queue="mail")
    other = sclient.insert({"to": "b"}, kind="send_email", queue="mail")
    set_state(database_url, failed.id, "failed")
    set_state(database_url, other.id, "failed")

    out = wai_ok(database_url, "dlq", "move", str(failed.id))
    assert out == f"job {failed.id} moved to the dead-letter queue (reason 'manual')\n"
    entry = wai_json(database_url, "dlq", "move", str(other.id), "--reason", "poison message")
    assert entry["reason"] == "poison message"
    assert entry["job"]["id"] == other.id
    assert [e.reason for e in sclient.list_dlq()] == ["poison message", "manual"]
    with pytest.raises(wai.JobNotFound):
        sclient.get_job(failed.id)

    live = sclient.insert({"to": "c"}, kind="send_email", queue="mail")
    err = wai_fails(database_url, "dlq", "move", str(live.id))
    assert f"cannot move job {live.id} to the dead-letter queue: it is available" in err
    assert f"no job with id {failed.id}" in wai_fails(database_url, "dlq", "move", str(failed.id))
    err = wai_fails(database_url, "dlq", "move", str(live.id), "--reason", "", status=2)
    assert "a dead-letter reason is 1-200 characters" in err
    assert sclient.get_job(live.id).state == wai.JobState.AVAILABLE


# -- cron -----------------------------------------------------------------------------------


@pytest.fixture
def schedules(sclient: wai.Client) -> list[str]:
    """Two stored schedules: ``nightly`` (Berlin, catch_up) and ``ping`` (every 5 minutes)."""
    sclient.periodic("nightly", "0 3 * * *", {"day": "x"}, kind="report", queue="reports",
                     timezone="Europe/Berlin", missed_fire_policy="catch_up",
                     tags=["ops"])  # fmt: skip
    sclient.periodic("ping", "*/5 * * * *", {"n": 1}, kind="ping")
    return sclient.upsert_cron()


def test_cron_list_json_and_table(database_url: str, schedules: list[str]) -> None:
    listed = wai_json(database_url, "cron", "list")
    assert [s["name"] for s in listed] == ["nightly", "ping"]
    nightly = listed[0]
    assert nightly["expr"] == "0 3 * * *"
    assert nightly["timezone"] == "Europe/Berlin"
    assert (nightly["kind"], nightly["queue"]) == ("report", "reports")
    assert nightly["missed_fire_policy"] == "catch_up"
    assert nightly["args"] == {"day": "x"}
    assert nightly["tags"] == ["ops"]
    assert nightly["paused"] is False
    assert nightly["last_fire_at"] is None
    next_fire = datetime.fromisoformat(nightly["next_fire_at"])
    assert next_fire > datetime.now(UTC)
    assert next_fire.astimezone(UTC).hour in (1, 2)  # 03:00 in Berlin

    header, *lines = wai_ok(database_url, "cron", "list").splitlines()
    assert header.split() == ["NAME", "EXPR", "TIMEZONE", "KIND", "QUEUE", "POLICY", "PAUSED",
                              "LAST", "FIRE", "NEXT", "FIRE"]  # fmt: skip
    assert lines[0].split()[:10] == ["nightly", "0", "3", "*", "*", "*", "Europe/Berlin",
                                     "report", "reports", "catch_up"]  # fmt: skip
    assert lines[1].split()[7:12] == ["ping", "default", "coalesce", "no", "-"]


def test_cron_list_when_none_is_stored(database_url: str) -> None:
    assert wai_json(database_url, "cron", "list") == []
    result = run_wai("--database-url", database_url, "cron", "list")
    assert result.returncode == 0
    assert "no periodic schedule is stored" in result.stderr


def test_cron_show(database_url: str, schedules: list[str]) -> None:
    text = wai_ok(database_url, "cron", "show", "nightly")
    for expected in ("name:", "nightly", "Europe/Berlin", '{"day": "x"}', "policy:", "catch_up",
                     "paused:", "next fire:"):  # fmt: skip
        assert expected in text, expected
    assert wai_json(database_url, "cron", "show", "ping")["expr"] == "*/5 * * * *"


def test_cron_pause_and_resume(
    database_url: str, sclient: wai.Client, schedules: list[str]
) -> None:
    out = wai_ok(database_url, "cron", "pause", "nightly")
    assert "schedule 'nightly' paused" in out
    assert sclient.get_cron("nightly").paused
    assert not sclient.get_cron("ping").paused
    listed = {s["name"]: s for s in wai_json(database_url, "cron", "list")}
    assert listed["nightly"]["paused"] is True
    assert listed["nightly"]["next_fire_at"] is None
    assert wai_json(database_url, "cron", "pause", "nightly")["paused"] is True  # stays paused

    out = wai_ok(database_url, "cron", "resume", "nightly")
    assert "schedule 'nightly' resumed: next fire 20" in out
    assert "catch_up policy" in out
    assert not sclient.get_cron("nightly").paused
    assert wai_json(database_url, "cron", "resume", "nightly")["paused"] is False


def test_cron_trigger(database_url: str, sclient: wai.Client, schedules: list[str]) -> None:
    out = wai_ok(database_url, "cron", "trigger", "nightly")
    assert out.startswith("schedule 'nightly' triggered: job ")
    job_id = int(out.split("job ")[1].split()[0])
    job = sclient.get_job(job_id)
    assert (job.kind, job.queue, job.args) == ("report", "reports", {"day": "x"})
    assert job.metadata["wai.cron"]["manual"] is True

    sclient.pause_cron("ping")
    row = wai_json(database_url, "cron", "trigger", "ping")  # even while paused
    assert row["kind"] == "ping"
    assert row["state"] == "available"
    assert sclient.get_job(row["id"]).metadata["wai.cron"]["name"] == "ping"
    assert sclient.get_cron("nightly").last_fire_at is None  # the cursor stays


def test_cron_delete(database_url: str, sclient: wai.Client, schedules: list[str]) -> None:
    err = wai_fails(database_url, "cron", "delete", "ping", status=2)
    assert "not confirmed: pass --yes to delete periodic schedule 'ping'" in err
    assert [s.name for s in sclient.list_cron()] == ["nightly", "ping"]

    out = wai_ok(database_url, "cron", "delete", "ping", "--yes")
    assert "schedule 'ping' deleted" in out
    assert [s.name for s in sclient.list_cron()] == ["nightly"]

    status, output = run_wai_tty(database_url, "cron", "delete", "nightly", answer="no\n")
    assert status == 1, output
    assert "delete periodic schedule 'nightly'? [y/N]" in output
    assert [s.name for s in sclient.list_cron()] == ["nightly"]


@pytest.mark.parametrize("action", ["show", "pause", "resume", "trigger", "delete"])
def test_cron_unknown_name(database_url: str, schedules: list[str], action: str) -> None:
    err = wai_fails(
        database_url, "cron", action, HOSTILE, *(["--yes"] if action == "delete" else [])
    )
    assert err == (
        f"wai: error: no periodic schedule named {HOSTILE!r}:"
        " `wai cron list` shows the stored ones\n"
    )


def test_cron_rejects_an_invalid_name(database_url: str) -> None:
    err = wai_fails(database_url, "cron", "pause", "x" * 201, status=2)
    assert "a schedule name is 1-200 characters" in err


# -- both -----------------------------------------------------------------------------------


def test_dlq_and_cron_on_an_unmigrated_database(empty_database_url: str) -> None:
    for args in (("dlq", "list"), ("dlq", "depth"), ("cron", "list"), ("dlq", "show", "1")):
        assert "run `wai migrate`" in wai_fails(empty_database_url, *args)


def test_help_lists_the_commands() -> None:
    top = run_wai("--help").stdout
    assert "dlq" in top
    assert "cron" in top
    dlq = run_wai("dlq", "--help").stdout
    for command in ("list", "show", "depth", "retry", "purge", "move"):
        assert command in dlq
    cron = run_wai("cron", "--help").stdout
    for command in ("list", "show", "pause", "resume", "trigger", "delete"):
        assert command in cron


# -- the progress bar, in process ------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_on_a_terminal_redraws_one_line() -> None:
    out = _Terminal()
    bar = ProgressBar("retrying", 4, stream=out, width=8)
    bar.update(1)
    bar.update(4)
    bar.finish()
    assert out.getvalue() == (
        "\rwai: retrying [##------] 1/4  25%\rwai: retrying [########] 4/4 100%\n"
    )


def test_progress_bar_elsewhere_prints_lines() -> None:
    out = io.StringIO()
    bar = ProgressBar("purging", 3, stream=out)
    bar.update(1)
    bar.update(5)  # more than counted (entries arrived meanwhile): capped at 100%
    bar.finish()
    assert out.getvalue() == "wai: purging: 1/3 (33%)\nwai: purging: 5/3 (100%)\n"
    empty = io.StringIO()
    ProgressBar("purging", 0, stream=empty).finish()
    assert empty.getvalue() == ""
