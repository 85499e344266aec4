"""The operator commands of ``wai`` (jobs, queues), run as ``python -m wai`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from typing import Any

import pytest

import wai
from tests.acceptance.test_cli import run_wai
from tests.factories import HOSTILE, execute, set_state

STATES = [s.value for s in wai.JobState]


def wai_ok(url: str, *args: str) -> str:
    """Run ``wai --database-url URL ARGS``; assert exit 0 and no error; return stdout."""
    result = run_wai("--database-url", url, *args)
    assert result.returncode == 0, result.stderr
    assert "error" not in result.stderr
    return result.stdout


def wai_json(url: str, *args: str) -> Any:
    """The parsed JSON that ``wai ... --json`` printed."""
    return json.loads(wai_ok(url, *args, "--json"))


def wai_fails(url: str, *args: str, status: int = 1) -> str:
    """Run a command that must fail with ``status`` and one clean error line; return it."""
    result = run_wai("--database-url", url, *args)
    assert result.returncode == status, result.stdout + result.stderr
    assert result.stderr.startswith("wai: error: "), result.stderr
    assert "Traceback" not in result.stderr
    return result.stderr


@pytest.fixture
def jobs(sclient: wai.Client) -> list[wai.JobRow]:
    """Three jobs: two ``send_email`` on queue ``mail`` (one tagged ``vip``), one ``resize``."""
    return [
        sclient.insert({"to": "a"}, kind="send_email", queue="mail"),
        sclient.insert({"to": "b"}, kind="send_email", queue="mail", tags=["vip"]),
        sclient.insert({"path": "x.png"}, kind="resize", queue="img", priority=1),
    ]


# -- jobs ---------------------------------------------------------------------------------


def test_jobs_list_json_is_every_field_newest_first(
    database_url: str, jobs: list[wai.JobRow]
) -> None:
    listed = wai_json(database_url, "jobs", "list")
    assert [j["id"] for j in listed] == [j.id for j in reversed(jobs)]
    first = listed[-1]
    assert first["kind"] == "send_email"
    assert first["queue"] == "mail"
    assert first["state"] == "available"
    assert first["args"] == {"to": "a"}
    assert first["errors"] == []
    assert first["trigger"] is None
    assert datetime.fromisoformat(first["created_at"]) == jobs[0].created_at
    assert set(first) >= {"attempt", "max_attempts", "run_at", "run_lease", "progress", "tags"}


def test_jobs_list_filters_and_pages(database_url: str, jobs: list[wai.JobRow]) -> None:
    def ids(*args: str) -> list[int]:
        return [j["id"] for j in wai_json(database_url, "jobs", "list", *args)]

    mail = [jobs[1].id, jobs[0].id]
    assert ids("--queue", "mail") == mail
    assert ids("--kind", "resize") == [jobs[2].id]
    assert ids("--tag", "vip") == [jobs[1].id]
    assert ids("--state", "completed") == []
    assert ids("--limit", "1") == [jobs[2].id]
    assert ids("--limit", "1", "--before-id", str(jobs[2].id)) == [jobs[1].id]
    assert ids("--queue", HOSTILE) == []


def test_jobs_list_by_search_and_time_range(database_url: str, jobs: list[wai.JobRow]) -> None:
    def ids(*args: str) -> list[int]:
        return [j["id"] for j in wai_json(database_url, "jobs", "list", *args)]

    execute(
        database_url,
        "UPDATE wai.jobs SET created_at = '2026-05-01T12:00:00Z'::timestamptz"
        " + (id - %s) * interval '1 hour'",
        (jobs[0].id,),
    )
    assert ids("--search", "EMAIL") == [jobs[1].id, jobs[0].id]
    assert ids("--search", str(jobs[2].id)) == [jobs[2].id]
    assert ids("--search", "%") == []  # literal: no kind holds a percent sign
    assert ids("--created-after", "2026-05-01T13:00:00Z") == [jobs[2].id, jobs[1].id]
    assert ids("--created-before", "2026-05-01T13:00:00+00:00") == [jobs[0].id]
    assert ids("--created-after", "2026-05-01T13:00:00Z", "--search", "resize") == [jobs[2].id]
    assert ids("--created-after", "1h") == []  # an hour ago: these were made in May 2026
    assert len(ids("--created-before", "1h")) == 3
    naive = run_wai(
        "--database-url", database_url, "jobs", "list", "--created-after", "2026-05-01T12:00"
    )
    assert naive.returncode == 2
    assert "has no UTC offset" in naive.stderr
    assert "search must be 1 to 200 characters" in wai_fails(
        database_url, "jobs", "list", "--search", "x" * 300, status=2
    )


def test_jobs_list_table_has_headers_and_a_paging_hint(
    database_url: str, jobs: list[wai.JobRow]
) -> None:
    result = run_wai("--database-url", database_url, "jobs", "list", "--limit", "2")
    assert result.returncode == 0, result.stderr
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["ID", "STATE", "KIND", "QUEUE", "PRI", "ATTEMPT", "RUN", "AT",
                              "LAST", "ERROR"]  # fmt: skip
    assert [line.split()[0] for line in lines] == [str(jobs[2].id), str(jobs[1].id)]
    assert "available" in lines[0]
    assert "0/25" in lines[0]
    assert f"--before-id {jobs[1].id}" in result.stderr  # more may follow


def test_jobs_list_rejects_a_bad_state(database_url: str) -> None:
    result = run_wai("--database-url", database_url, "jobs", "list", "--state", "bogus")
    assert result.returncode == 2
    assert "invalid choice: 'bogus'" in result.stderr


def test_jobs_show_prints_fields_errors_and_progress(
    database_url: str, sclient: wai.Client, jobs: list[wai.JobRow]
) -> None:
    job = jobs[0]
    execute(
        database_url,
        "UPDATE wai.jobs SET state = 'failed', attempt = 2, finalized_at = now(),"
        ' progress = \'{"percent": 40, "message": "half"}\','
        ' errors = \'[{"error": "boom\\nline two", "attempt": 1, "at": "2024-01-01T00:00:00Z"},'
        ' {"error": "final", "attempt": 2, "at": "2024-01-01T00:01:00Z", "terminal": true}]\''
        " WHERE id = %s",
        (job.id,),
    )

    shown = wai_json(database_url, "jobs", "show", str(job.id))
    assert shown["state"] == "failed"
    assert [e["error"] for e in shown["errors"]] == ["boom\nline two", "final"]
    assert shown["progress"] == {"percent": 40, "message": "half"}

    text = wai_ok(database_url, "jobs", "show", str(job.id))
    for expected in ("id:", "state:", "failed", "attempt:", "2 of 25", '{"to": "a"}',
                     "errors (2):", "boom", "      line two", "final", '"terminal": true',
                     '"percent": 40', "trigger:"):  # fmt: skip
        assert expected in text, expected


def test_jobs_show_unknown_id_fails(database_url: str) -> None:
    assert "no job with id 424242" in wai_fails(database_url, "jobs", "show", "424242")
    assert "no job with id -3" in wai_fails(database_url, "jobs", "show", "-3")


def test_jobs_cancel_then_cancel_again(
    database_url: str, sclient: wai.Client, jobs: list[wai.JobRow]
) -> None:
    job = jobs[0]
    out = wai_ok(database_url, "jobs", "cancel", str(job.id))
    assert f"job {job.id} cancelled" in out
    row = sclient.get_job(job.id)
    assert row.state == wai.JobState.CANCELLED
    assert row.errors[-1]["error"] == "cancelled by operator"

    err = wai_fails(database_url, "jobs", "cancel", str(job.id))
    assert f"cannot cancel job {job.id}: it is cancelled" in err
    assert "no job with id 999999" in wai_fails(database_url, "jobs", "cancel", "999999")
    assert sclient.get_job(job.id) == row


def test_jobs_retry_a_failed_job(
    database_url: str, sclient: wai.Client, jobs: list[wai.JobRow]
) -> None:
    job = jobs[0]
    set_state(database_url, job.id, "failed")
    retried = wai_json(database_url, "jobs", "retry", str(job.id))
    assert retried["id"] == job.id
    assert retried["state"] == "available"
    assert retried["attempt"] == 0
    assert retried["finalized_at"] is None

    err = wai_fails(database_url, "jobs", "retry", str(job.id))
    assert f"cannot retry job {job.id}: it is available" in err
    assert sclient.get_job(job.id).state == wai.JobState.AVAILABLE
    set_state(database_url, job.id, "cancelled")
    assert f"job {job.id} retried" in wai_ok(database_url, "jobs", "retry", str(job.id))


def test_jobs_commands_need_an_integer_id(database_url: str) -> None:
    result = run_wai("--database-url", database_url, "jobs", "cancel", "1; DROP TABLE x")
    assert result.returncode == 2
    assert "invalid int value" in result.stderr


# -- queues -------------------------------------------------------------------------------


def test_queues_list_json_and_table(database_url: str, jobs: list[wai.JobRow]) -> None:
    stats = wai_json(database_url, "queues", "list")
    assert [q["name"] for q in stats] == ["img", "mail"]
    mail = stats[1]
    assert mail["counts"] == {s: 2 if s == "available" else 0 for s in STATES}
    assert mail["paused"] is False
    assert mail["paused_at"] is None
    assert mail["oldest_available_lag"] >= 0

    header, *lines = wai_ok(database_url, "queues", "list").splitlines()
    assert header.split() == ["QUEUE", "PAUSED", "SCHEDULED", "AVAILABLE", "RUNNING",
                              "RETRYABLE", "WAITING", "COMPLETED", "FAILED", "CANCELLED",
                              "LAG"]  # fmt: skip
    assert lines[1].split()[:4] == ["mail", "no", "0", "2"]


def test_queues_pause_resume_drain(
    database_url: str, sclient: wai.Client, jobs: list[wai.JobRow]
) -> None:
    assert "queue 'mail' paused" in wai_ok(database_url, "queues", "pause", "mail")
    paused = {q["name"]: q["paused"] for q in wai_json(database_url, "queues", "list")}
    assert paused == {"img": False, "mail": True}

    assert "queue 'mail' resumed" in wai_ok(database_url, "queues", "resume", "mail")
    assert not any(q.paused for q in sclient.queue_stats())

    err = wai_fails(database_url, "queues", "drain", "mail", status=2)
    assert "pass --yes" in err  # stdin is not a terminal: nobody can confirm
    assert [sclient.get_job(j.id).state for j in jobs] == ["available"] * 3
    out = wai_ok(database_url, "queues", "drain", "mail", "--yes")
    assert "queue 'mail' drained: 2 jobs cancelled" in out
    assert [sclient.get_job(j.id).state for j in jobs] == ["cancelled", "cancelled", "available"]
    assert "drained: 0 jobs cancelled" in wai_ok(database_url, "queues", "drain", "mail", "-y")


def test_queues_reject_a_hostile_name(
    database_url: str, sclient: wai.Client, jobs: list[wai.JobRow]
) -> None:
    for action in ("pause", "resume", "drain", "limit"):
        extra = ("--rate", "5") if action == "limit" else ()
        err = wai_fails(database_url, "queues", action, HOSTILE, *extra, status=2)
        assert "invalid queue name" in err
    assert [sclient.get_job(j.id) for j in jobs] == jobs
    assert not any(q.paused for q in sclient.queue_stats())


def test_queues_limit_sets_keeps_and_lifts_each_limit(
    database_url: str, sclient: wai.Client, jobs: list[wai.JobRow]
) -> None:
    def mail() -> wai.QueueStats:
        return next(q for q in sclient.queue_stats() if q.name == "mail")

    out = wai_ok(
        database_url, "queues", "limit", "mail",
        "--rate", "50", "--per", "2", "--burst", "10", "--global-concurrency", "5",
    )  # fmt: skip
    assert out == "queue 'mail' limits: rate 50/2s burst 10, global concurrency 5\n"
    assert (mail().rate_limit, mail().global_concurrency) == (wai.RateLimit(50, per=2, burst=10), 5)

    # the limit no option names is kept as it is (the rate limit set again unchanged)
    out = wai_ok(database_url, "queues", "limit", "mail", "--global-concurrency", "3")
    assert out == "queue 'mail' limits: rate 50/2s burst 10, global concurrency 3\n"
    assert (mail().rate_limit, mail().global_concurrency) == (wai.RateLimit(50, per=2, burst=10), 3)
    out = wai_ok(database_url, "queues", "limit", "mail", "--no-rate")
    assert out == "queue 'mail' limits: no rate limit, global concurrency 3\n"
    assert (mail().rate_limit, mail().global_concurrency) == (None, 3)

    # --per and --burst default as wai.RateLimit's do; --json gives the limits as stored
    assert wai_json(database_url, "queues", "limit", "mail", "--rate", "30") == {
        "queue": "mail",
        "rate_limit": {"limit": 30, "per": 1.0, "burst": 3},
        "global_concurrency": 3,
    }

    # both shown by `queues list`: a table of the queues with flow control, and the JSON
    header, line = wai_ok(database_url, "queues", "list").split("\n\n")[1].splitlines()
    assert header.split() == ["QUEUE", "RATE", "LIMIT", "TOKENS", "RUNNING", "GLOBAL", "LIMIT",
                              "KEYS", "RUNNING", "WAITING", "TURN"]  # fmt: skip
    assert line.split() == ["mail", "30/1s", "burst", "3", "3.0", "0", "3", "0", "0"]
    [listed] = [q for q in wai_json(database_url, "queues", "list") if q["name"] == "mail"]
    assert listed["rate_limit"] == {"limit": 30, "per": 1.0, "burst": 3}
    assert (listed["rate_tokens"], listed["global_concurrency"]) == (3.0, 3)
    assert (listed["keys_running"], listed["waiting_turn"]) == (0, 0)

    out = wai_ok(database_url, "queues", "limit", "mail", "--no-rate", "--no-global-concurrency")
    assert out == "queue 'mail' limits: no rate limit, no global concurrency\n"
    assert (mail().rate_limit, mail().global_concurrency) == (None, None)
    assert "RATE LIMIT" not in wai_ok(database_url, "queues", "list")  # no flow control left


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--rate", "0"), "argument --rate: must be 1..1000000, got '0'"),
        (("--rate", "abc"), "argument --rate: not an integer: 'abc'"),
        (("--rate", "2.5"), "argument --rate: not an integer: '2.5'"),
        (("--rate", "1000001"), "argument --rate: must be 1..1000000"),
        (("--rate", "5", "--per", "-1"), "argument --per: must be 0.001..86400, got '-1'"),
        (("--rate", "5", "--per", "0"), "argument --per: must be 0.001..86400, got '0'"),
        (("--rate", "5", "--per", "nan"), "argument --per: must be 0.001..86400, got 'nan'"),
        (("--rate", "5", "--per", "1e9"), "argument --per: must be 0.001..86400"),
        (("--rate", "5", "--per", "soon"), "argument --per: not a number of seconds: 'soon'"),
        (("--rate", "5", "--burst", "0"), "argument --burst: must be 1..1000000, got '0'"),
        (("--global-concurrency", "-2"), "argument --global-concurrency: must be 1..1000000"),
        (("--global-concurrency", "x"), "argument --global-concurrency: not an integer: 'x'"),
        (("--rate", "5", "--no-rate"), "argument --no-rate: not allowed with argument --rate"),
        (
            ("--global-concurrency", "2", "--no-global-concurrency"),
            "argument --no-global-concurrency: not allowed with argument --global-concurrency",
        ),
        (("--per", "2"), "error: --per goes with --rate N (the rate limit is set whole)"),
        (("--burst", "2", "--no-rate"), "error: --burst goes with --rate N"),
        ((), "error: nothing to change: give --rate N [--per SECONDS] [--burst N], --no-rate,"),
    ],
)
def test_queues_limit_refuses_bad_input_and_changes_nothing(
    database_url: str, sclient: wai.Client, args: tuple[str, ...], message: str
) -> None:
    sclient.set_queue_limits("mail", rate_limit=wai.RateLimit(9, burst=2), global_concurrency=4)
    result = run_wai("--database-url", database_url, "queues", "limit", "mail", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    [mail] = sclient.queue_stats()
    assert (mail.rate_limit, mail.global_concurrency) == (wai.RateLimit(9, burst=2), 4)


def test_queues_limit_sets_and_lifts_a_kinds_rate_limit(
    database_url: str, sclient: wai.Client, jobs: list[wai.JobRow]
) -> None:
    def mail() -> wai.QueueStats:
        return next(q for q in sclient.queue_stats() if q.name == "mail")

    sclient.set_queue_limits("mail", rate_limit=wai.RateLimit(9, burst=2), global_concurrency=4)
    out = wai_ok(
        database_url, "queues", "limit", "mail", "--kind", "send_email",
        "--rate", "10", "--per", "60", "--burst", "3",
    )  # fmt: skip
    assert out == "queue 'mail' kind 'send_email' limit: rate 10/60s burst 3\n"
    assert mail().kind_rate_limits == {"send_email": wai.RateLimit(10, per=60, burst=3)}
    # the queue's own limits are left as they are
    assert (mail().rate_limit, mail().global_concurrency) == (wai.RateLimit(9, burst=2), 4)

    # --per and --burst default as wai.RateLimit's do; --json gives the limit as stored
    assert wai_json(
        database_url, "queues", "limit", "mail", "--kind", "resize", "--rate", "30"
    ) == {
        "queue": "mail",
        "kind": "resize",
        "rate_limit": {"limit": 30, "per": 1.0, "burst": 3},
    }
    # a queue no job names yet gets its row
    wai_ok(database_url, "queues", "limit", "fresh", "--kind", "send_email", "--rate", "5")

    # `queues list` shows them: a table of the limited kinds with their tokens, and the JSON
    sections = wai_ok(database_url, "queues", "list").split("\n\n")
    header, *lines = sections[2].splitlines()
    assert header.split() == ["QUEUE", "KIND", "RATE", "LIMIT", "TOKENS"]
    assert [line.split() for line in lines] == [
        ["fresh", "send_email", "5/1s", "burst", "1", "1.0"],
        ["mail", "resize", "30/1s", "burst", "3", "3.0"],
        ["mail", "send_email", "10/60s", "burst", "3", "3.0"],
    ]  # each bucket starts full
    [listed] = [q for q in wai_json(database_url, "queues", "list") if q["name"] == "mail"]
    assert listed["kind_rate_limits"] == {
        "resize": {"limit": 30, "per": 1.0, "burst": 3},
        "send_email": {"limit": 10, "per": 60.0, "burst": 3},
    }
    assert listed["kind_tokens"] == {"resize": 3.0, "send_email": 3.0}

    out = wai_ok(database_url, "queues", "limit", "mail", "--kind", "send_email", "--no-rate")
    assert out == "queue 'mail' kind 'send_email' limit: no rate limit\n"
    assert wai_json(database_url, "queues", "limit", "mail", "--kind", "resize", "--no-rate") == {
        "queue": "mail",
        "kind": "resize",
        "rate_limit": None,
    }
    assert mail().kind_rate_limits == {}
    assert (mail().rate_limit, mail().global_concurrency) == (wai.RateLimit(9, burst=2), 4)
    # lifting a limit the kind does not have changes nothing
    wai_ok(database_url, "queues", "limit", "mail", "--kind", "nothing", "--no-rate")
    wai_ok(database_url, "queues", "limit", "fresh", "--kind", "send_email", "--no-rate")
    assert "KIND" not in wai_ok(database_url, "queues", "list")  # no kind limit left


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--rate", "5", "--global-concurrency", "3"), "error: --global-concurrency does not go "
         "with --kind: a kind has only a rate limit"),
        (("--no-rate", "--no-global-concurrency"), "error: --no-global-concurrency does not go"),
        ((), "error: nothing to change: give --kind KIND with --rate N"),
        (("--per", "2"), "error: --per goes with --rate N"),
        (("--rate", "0"), "argument --rate: must be 1..1000000, got '0'"),
        (("--rate", "5", "--per", "nan"), "argument --per: must be 0.001..86400, got 'nan'"),
        (("--rate", "5", "--no-rate"), "argument --no-rate: not allowed with argument --rate"),
    ],
)  # fmt: skip
def test_queues_limit_refuses_a_kind_with_bad_options_and_changes_nothing(
    database_url: str, sclient: wai.Client, args: tuple[str, ...], message: str
) -> None:
    sclient.set_kind_rate_limit("mail", "send_email", wai.RateLimit(9, burst=2))
    result = run_wai(
        "--database-url", database_url, "queues", "limit", "mail", "--kind", "send_email", *args
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    [mail] = sclient.queue_stats()
    assert mail.kind_rate_limits == {"send_email": wai.RateLimit(9, burst=2)}
    assert (mail.rate_limit, mail.global_concurrency) == (None, None)


@pytest.mark.parametrize("kind", [HOSTILE, "", "a b", "x" * 201, "charge;drop", "charge\n"])
def test_queues_limit_refuses_a_hostile_kind(
    database_url: str, sclient: wai.Client, kind: str
) -> None:
    err = wai_fails(
        database_url, "queues", "limit", "mail", "--kind", kind, "--rate", "5", status=2
    )
    assert "invalid job kind" in err
    assert sclient.queue_stats() == []


def test_operator_commands_on_an_unmigrated_database(empty_database_url: str) -> None:
    for args in (("jobs", "list"), ("queues", "list"), ("jobs", "cancel", "1")):
        err = wai_fails(empty_database_url, *args)
        assert "run `wai migrate`" in err


def test_a_reader_that_goes_away_costs_no_traceback(database_url: str, sclient: wai.Client) -> None:
    """`wai jobs list | head -1`: the closed pipe ends the command quietly, exit 1."""
    sclient.copy_many(wai.EnqueueRequest({"n": n}, kind="page") for n in range(3000))
    env = {k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")}
    argv = [sys.executable, "-m", "wai", "--database-url", database_url]
    with subprocess.Popen(
        [*argv, "jobs", "list", "--json", "--limit", "3000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        assert proc.stdout.read(1) == b"["  # far more than a pipe buffer is still to come
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        status = proc.wait(timeout=60)
    assert status == 1
    assert "Traceback" not in stderr
    assert "BrokenPipe" not in stderr


def test_jobs_lineage_prints_the_chain_as_a_tree_and_json(
    database_url: str, sclient: wai.Client
) -> None:
    # first -> second -> third, and first -> fourth; the third owes its cancelled follow-ups
    rows = [sclient.insert({"n": i}, kind="work", queue="q") for i in range(4)]
    first, second, third, fourth = rows
    for parent, child, spec in (
        (first, second, "next"),
        (second, third, "next"),
        (first, fourth, "also"),
    ):
        execute(
            database_url,
            "UPDATE wai.jobs SET trigger_job_id = %s, trigger_run_lease = 1,"
            " trigger_outcome = 'completed', trigger_spec = %s WHERE id = %s",
            (parent.id, spec, child.id),
        )
    sclient.cancel(third.id)

    tree = wai_ok(database_url, "jobs", "lineage", str(third.id)).splitlines()
    assert tree[0].startswith(f"{first.id} work [available]")
    assert tree[1].startswith(f"  {second.id} work [available]  <- completed (next)")
    assert tree[2].startswith(f"    {third.id} work [cancelled]  <- completed (next)")
    assert tree[2].endswith("<= this job")
    assert "(owed: cancelled follow-ups, outbox row" in tree[3]

    down = wai_ok(database_url, "jobs", "lineage", str(first.id)).splitlines()
    nodes = [line for line in down if not line.strip().startswith("(")]
    assert [line.split()[0] for line in nodes] == [
        str(first.id),
        str(second.id),
        str(third.id),
        str(fourth.id),
    ]
    assert [len(line) - len(line.lstrip()) for line in nodes] == [0, 2, 4, 2]  # a tree
    assert down[3] == " " * 6 + down[3].lstrip()  # the owed row under the third job

    shown = wai_json(database_url, "jobs", "lineage", str(first.id))
    assert [f["id"] for f in shown["followups"]] == [second.id, fourth.id, third.id]
    assert shown["truncated"] is False

    cut = run_wai("--database-url", database_url, "jobs", "lineage", str(first.id), "--limit", "1")
    assert cut.returncode == 0
    assert "more follow-ups than 1" in cut.stderr
    assert "no job with id 424242" in wai_fails(database_url, "jobs", "lineage", "424242")
    usage = run_wai("--database-url", database_url, "jobs", "lineage", "1", "--limit", "0")
    assert usage.returncode == 2
    assert "argument --limit: must be 1..10000, got '0'" in usage.stderr
