"""``wai worker`` as a process: its logs, Ctrl-C, ``--dlq``, the migrate hint, completion."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import wai
from tests.acceptance.test_cli import run_wai
from wai import cli
from wai.cli import worker

pytestmark = pytest.mark.timeout(120)

APP = textwrap.dedent(
    """
    import asyncio
    from dataclasses import dataclass

    import wai

    client = wai.AsyncClient()  # the URL comes from the CLI (WAI_DATABASE_URL)

    @dataclass
    class Nap:
        seconds: float

    @client.task(Nap, queue="naps")
    async def nap(job: wai.Job[Nap]) -> None:
        await asyncio.sleep(job.args.seconds)

    @dataclass
    class Flaky:
        n: int

    @client.task(Flaky, queue="naps")
    async def flaky(job: wai.Job[Flaky]) -> None:
        raise ValueError(f"flaky {job.args.n}\\nsecond line of the message")

    @dataclass
    class Poison:
        n: int

    @client.task(Poison, queue="naps")
    async def poison(job: wai.Job[Poison]) -> None:
        raise wai.TerminalError("poisoned input")

    @dataclass
    class Heap:
        path: str

    @client.task(Heap, queue="naps")
    async def heap(job: wai.Job[Heap]) -> None:
        import gc, pathlib

        pathlib.Path(job.args.path).write_text(str(gc.get_freeze_count()))
    """
)

#: Small timings for the worker under test.
FAST = ("--poll-interval", "0.1", "--election-interval", "0.2", "--promote-interval", "0.1")


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    (tmp_path / "app.py").write_text(APP)
    return tmp_path


def json_lines(stderr: str) -> list[dict[str, Any]]:
    """The records of a ``--log-format json`` run: every line must be one JSON object."""
    records: list[dict[str, Any]] = []
    for line in stderr.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}\n{stderr}") from None
        assert isinstance(record, dict), line
        records.append(record)  # pyright: ignore[reportUnknownArgumentType]
    return records


def check_job_records(records: list[dict[str, Any]], jobs: dict[int, tuple[str, str]]) -> int:
    """Every record naming one of ``jobs`` (id: kind, queue) carries its fields; how many."""
    checked = 0
    for r in records:
        named = {int(n) for n in re.findall(r"\bjob (\d+)\b", r["message"])}
        if not named and "job_id" not in r:
            continue
        assert named <= {r.get("job_id")}, r
        assert (r["kind"], r["queue"]) == jobs[r["job_id"]], r
        attempt = re.search(r"\battempt (\d+)/(\d+)\b", r["message"])
        assert attempt is not None, r
        assert (r["attempt"], r["max_attempts"]) == (int(attempt[1]), int(attempt[2])), r
        checked += 1
    return checked


def one(records: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    found = [r for r in records if all(r.get(k) == v for k, v in match.items())]
    assert len(found) == 1, (match, records)
    return found[0]


# -- logging --------------------------------------------------------------------------


def test_worker_logs_failed_attempts_start_and_stop_as_json(
    database_url: str, sclient: wai.Client, app_dir: Path
) -> None:
    retried = sclient.insert({"n": 1}, kind="flaky", queue="naps", max_attempts=3).id
    exhausted = sclient.insert({"n": 2}, kind="flaky", queue="naps", max_attempts=1).id
    discarded = sclient.insert({"n": 3}, kind="poison", queue="naps").id
    completed = sclient.insert({"seconds": 0}, kind="nap", queue="naps").id

    result = run_wai(
        "--database-url", database_url, "worker", "app:client", "--burst", *FAST,
        "--log-format", "json", "--log-level", "debug",
        cwd=app_dir,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    records = json_lines(result.stderr)  # the banner too: every line is JSON
    for r in records:
        assert {"time", "level", "logger", "message"} <= r.keys()
        assert r["logger"].startswith("wai")
    banner = one(records, logger="wai.cli")
    assert banner["level"] == "INFO"
    assert banner["message"].startswith("worker for app:client: queues naps")
    kinds = {retried: "flaky", exhausted: "flaky", discarded: "poison", completed: "nap"}
    assert check_job_records(records, {i: (k, "naps") for i, k in kinds.items()}) >= 4

    retry = one(records, logger="wai.jobs", job_id=retried)
    assert retry["level"] == "INFO"
    assert (retry["kind"], retry["queue"], retry["attempt"]) == ("flaky", "naps", 1)
    assert retry["max_attempts"] == 3
    assert retry["outcome"] == "retried"
    assert "attempt 1/3 failed: ValueError: flaky 1; retry in " in retry["message"]
    assert "second line" not in retry["message"]  # the error's first line only
    next_run = sclient.get_job(retried).run_at.astimezone().isoformat()
    assert next_run[:10] in retry["message"]  # the date of the next run

    gone = one(records, logger="wai.jobs", job_id=exhausted)
    assert gone["level"] == "WARNING"
    assert gone["message"].endswith("failed: ValueError: flaky 2; exhausted")

    poison = one(records, logger="wai.jobs", job_id=discarded)
    assert poison["level"] == "WARNING"
    assert (
        "TerminalError: poisoned input; discarded (terminal error, no retry)" in (poison["message"])
    )

    done = one(records, logger="wai.jobs", job_id=completed)
    assert done["level"] == "DEBUG"
    assert "completed in" in done["message"]

    started = one(records, logger="wai.worker", message=started_message(records))
    assert started["queues"] == {"naps": 10}
    assert started["schema"] == "wai"
    assert started["instance_id"]
    stopped = next(r for r in records if r["message"].startswith("worker stopped after"))
    assert stopped["finished"] == 4
    assert "4 attempts finished" in stopped["message"]


def started_message(records: list[dict[str, Any]]) -> str:
    return next(r["message"] for r in records if r["message"].startswith("worker started:"))


def test_worker_logs_text_at_info_by_default(
    database_url: str, sclient: wai.Client, app_dir: Path
) -> None:
    retried = sclient.insert({"n": 1}, kind="flaky", queue="naps", max_attempts=3).id
    completed = sclient.insert({"seconds": 0}, kind="nap", queue="naps").id

    result = run_wai(
        "--database-url", database_url, "worker", "app:client", "--burst", *FAST, cwd=app_dir
    )

    assert result.returncode == 0, result.stderr
    assert f"INFO wai.jobs: job {retried} (flaky, queue naps) attempt 1/3 failed: " in (
        result.stderr
    )
    assert "INFO wai.worker: worker started: queues naps=10; schema 'wai'" in result.stderr
    assert f"job {completed} " not in result.stderr  # completions are DEBUG


def test_worker_runs_jobs_with_its_startup_heap_frozen(
    database_url: str, sclient: wai.Client, app_dir: Path
) -> None:
    # The handler reads the collector of the process it runs in: the app, wai and psycopg
    # were frozen before the first claim (wai.worker._heap).
    seen = app_dir / "frozen.txt"
    sclient.insert({"path": str(seen)}, kind="heap", queue="naps")

    result = run_wai(
        "--database-url", database_url, "worker", "app:client", "--burst", *FAST,
        "--log-level", "debug", cwd=app_dir,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    frozen = int(seen.read_text())
    assert frozen > 10_000  # wai and psycopg alone are tens of thousands of objects
    logged = re.search(r"DEBUG wai.worker: froze (\d+) objects of the startup heap", result.stderr)
    assert logged is not None, result.stderr
    # frozen before the job ran; some of it freed since by reference counting
    assert int(logged[1]) >= frozen


def test_worker_log_level_warning_hides_retries(
    database_url: str, sclient: wai.Client, app_dir: Path
) -> None:
    retried = sclient.insert({"n": 1}, kind="flaky", queue="naps", max_attempts=3).id
    exhausted = sclient.insert({"n": 2}, kind="flaky", queue="naps", max_attempts=1).id

    result = run_wai(
        "--database-url", database_url, "worker", "app:client", "--burst", *FAST,
        "--log-level", "warning",
        cwd=app_dir,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert f"WARNING wai.jobs: job {exhausted} " in result.stderr
    assert f"job {retried} " not in result.stderr
    assert "worker started" not in result.stderr


def test_log_options_are_checked(database_url: str, app_dir: Path) -> None:
    result = run_wai(
        "--database-url", database_url, "worker", "app:client", "--log-level", "loud",
        cwd=app_dir,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--log-level" in result.stderr


# -- --dlq ----------------------------------------------------------------------------


def test_worker_dlq_routes_failed_jobs_and_no_dlq_turns_it_off(
    database_url: str, sclient: wai.Client, app_dir: Path
) -> None:
    dead = sclient.insert({"n": 1}, kind="flaky", queue="naps", max_attempts=1).id
    worker = ("--database-url", database_url, "worker", "app:client", "--burst", *FAST)

    result = run_wai(*worker, "--dlq", "--log-format", "json", cwd=app_dir)

    assert result.returncode == 0, result.stderr
    entry = sclient.get_dlq_entry(dead)
    assert entry.reason == "max_attempts_exhausted"
    line = one(json_lines(result.stderr), logger="wai.jobs", job_id=dead)
    assert "moved to the dead-letter queue (max_attempts_exhausted)" in line["message"]

    kept = sclient.insert({"n": 2}, kind="poison", queue="naps").id
    result = run_wai(*worker, "--no-dlq", cwd=app_dir)

    assert result.returncode == 0, result.stderr
    assert sclient.get_job(kept).state == wai.JobState.FAILED
    assert sclient.dlq_depth("naps") == 1  # only the first one


def test_supervised_workers_log_json_lines_only(
    database_url: str, sclient: wai.Client, app_dir: Path
) -> None:
    job = sclient.insert({"n": 1}, kind="flaky", queue="naps", max_attempts=1).id
    result = run_wai(
        "--database-url", database_url, "worker", "app:client", "--burst", *FAST,
        "--processes", "2", "--log-format", "json",
        cwd=app_dir,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    records = json_lines(result.stderr)  # the supervisor's lines and its children's
    supervising = [r for r in records if r["message"].startswith("supervising 2 worker")]
    assert [r["logger"] for r in supervising] == ["wai.cli"]
    gone = one(records, logger="wai.jobs", job_id=job)
    assert (gone["level"], gone["kind"], gone["queue"], gone["attempt"]) == (
        "WARNING",
        "flaky",
        "naps",
        1,
    )


def test_worker_help_documents_dlq_and_logging() -> None:
    result = run_wai("worker", "--help")
    assert result.returncode == 0
    for option in ("--dlq, --no-dlq", "--log-level", "--log-format", "dead-letter queue"):
        assert option in result.stdout


@pytest.mark.parametrize("dlq", [[], ["--dlq"], ["--no-dlq"]])
def test_worker_processes_pass_dlq_and_logging_to_their_children(dlq: list[str]) -> None:
    parser = cli.build_parser()
    args = parser.parse_args(
        ["worker", "app:client", "--processes", "2", "--log-level", "debug",
         "--log-format", "json", *dlq]
    )  # fmt: skip
    child = parser.parse_args(worker._worker_argv(args)[3:])  # pyright: ignore[reportPrivateUsage]
    assert (child.log_level, child.log_format) == ("debug", "json")
    assert child.dlq is args.dlq
    assert args.dlq is {"--dlq": True, "--no-dlq": False}.get(dlq[0] if dlq else "")


# -- the migrate hint ---------------------------------------------------------------------


def test_unmigrated_other_schema_hint_names_the_schema_and_the_database(
    empty_database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text(
        "import wai\nclient = wai.AsyncClient(schema='billing')\n"
        "@client.task(dict, kind='noop', queue='q')\nasync def noop(job): pass\n"
    )
    result = run_wai(
        "worker", "app:client", "--burst", cwd=tmp_path, env={"DATABASE_URL": empty_database_url}
    )
    assert result.returncode == 1
    assert "run `wai --schema billing migrate`" in result.stderr
    assert "$DATABASE_URL" in result.stderr

    result = run_wai(
        "--database-url", empty_database_url, "--schema", "billing", "migrate", "--check"
    )
    assert result.returncode == 1
    assert "run `wai --schema billing migrate`" in result.stderr

    result = run_wai("--database-url", empty_database_url, "migrate", "--check")
    assert result.returncode == 1
    assert "run `wai migrate`" in result.stderr  # the default schema needs no option


# -- completion ---------------------------------------------------------------------------


def test_completion_bash_is_valid_bash_naming_the_commands(tmp_path: Path) -> None:
    result = run_wai("completion", "bash")
    assert result.returncode == 0, result.stderr
    script = tmp_path / "wai.bash"
    script.write_text(result.stdout)
    check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    for word in ("worker", "dlq", "migrate", "completion", "--log-format"):
        assert word in result.stdout


@pytest.mark.parametrize("shell", ["zsh", "tcsh"])
def test_completion_other_shells(shell: str) -> None:
    result = run_wai("completion", shell)
    assert result.returncode == 0, result.stderr
    assert "worker" in result.stdout


def test_completion_rejects_an_unknown_shell() -> None:
    result = run_wai("completion", "fish")
    assert result.returncode == 2


# -- Ctrl-C -------------------------------------------------------------------------------


class Worker:
    """One ``wai worker`` process, its stderr in a file, never outliving the test."""

    def __init__(self, cwd: Path, database_url: str, *args: str) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")}
        self.log = cwd / "worker.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "wai", "--database-url", database_url, "worker",
                 "app:client", *FAST, *args],
                cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_output(self, text: str, timeout: float = 30) -> None:
        wait_until(lambda: text in self.output(), timeout, f"{text!r} in\n{self.output()}")

    def interrupt(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def exit_code(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"no exit within {timeout} s\n{self.output()}") from None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def wait_until(check: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def spawn(app_dir: Path, database_url: str) -> Iterator[Callable[..., Worker]]:
    workers: list[Worker] = []

    def start(*args: str) -> Worker:
        workers.append(Worker(app_dir, database_url, *args))
        return workers[-1]

    yield start
    for w in workers:
        w.close()


def running(sclient: wai.Client, job_id: int) -> bool:
    return sclient.get_job(job_id).state == wai.JobState.RUNNING


@pytest.mark.slow
def test_second_ctrl_c_stops_at_once_recording_the_attempt_as_retryable(
    sclient: wai.Client, spawn: Callable[..., Worker]
) -> None:
    job = sclient.insert({"seconds": 600}, kind="nap", queue="naps").id
    worker = spawn("--shutdown-timeout", "300")
    wait_until(lambda: running(sclient, job), 30, "the job to start")

    worker.interrupt()
    worker.wait_output(
        "wai: shutting down: waiting up to 300 s for 1 running job (Ctrl-C again to stop now)"
    )
    time.sleep(0.5)
    assert worker.proc.poll() is None  # waiting for the job
    assert running(sclient, job)

    worker.interrupt()
    assert worker.exit_code(timeout=20) == 130, worker.output()

    row = sclient.get_job(job)  # written by the worker itself: no rescue involved
    assert row.state in (wai.JobState.RETRYABLE, wai.JobState.AVAILABLE)
    assert row.attempt == 1
    assert len(row.errors) == 1
    assert row.errors[0]["attempt"] == 1
    assert row.errors[0]["error"].startswith("worker interrupted")
    assert "Traceback" not in worker.output()
    assert sclient.list_runtime_instances() == []  # its record is gone too


@pytest.mark.slow
def test_one_ctrl_c_lets_the_running_job_finish(
    sclient: wai.Client, spawn: Callable[..., Worker]
) -> None:
    job = sclient.insert({"seconds": 2}, kind="nap", queue="naps").id
    worker = spawn("--shutdown-timeout", "60")
    wait_until(lambda: running(sclient, job), 30, "the job to start")

    worker.interrupt()
    worker.wait_output("wai: shutting down: waiting up to 60 s for 1 running job")

    assert worker.exit_code(timeout=60) == 0, worker.output()
    row = sclient.get_job(job)
    assert row.state == wai.JobState.COMPLETED
    assert row.errors == ()
    assert "1 attempt finished in time" in worker.output()
