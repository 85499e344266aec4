"""The README's Quickstart, as a user runs it: the files of examples/quickstart/, real processes.

The README shows these files verbatim (``tests/unit/test_docs_snippets.py`` checks that),
so what passes here is what the Quickstart says.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import wai

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quickstart"


@pytest.fixture
def quickstart(tmp_path: Path) -> Path:
    """A directory holding a copy of examples/quickstart/ (as a user's checkout would)."""
    for name in ("myapp.py", "enqueue.py"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    return tmp_path


def _env(url: str, tmp_path: Path) -> dict[str, str]:
    """The user's shell after `export WAI_DATABASE_URL=...`; an embedded start would show."""
    env = {k: v for k, v in os.environ.items() if k not in ("WAI_DATABASE_URL", "DATABASE_URL")}
    # If anything started an embedded server it would create this directory.
    return {**env, "WAI_DATABASE_URL": url, "WAI_EMBEDDED_DIR": str(tmp_path / "embedded")}


def _run(cwd: Path, env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=90,
        check=False,
    )  # fmt: skip


def test_quickstart_with_the_cli(empty_database_url: str, quickstart: Path) -> None:
    env = _env(empty_database_url, quickstart)

    migrated = _run(quickstart, env, "-m", "wai", "migrate", "myapp:client")
    assert migrated.returncode == 0, migrated.stderr
    assert "schema 'wai': applied migrations" in migrated.stdout

    inserted = _run(quickstart, env, "enqueue.py", "8")
    assert inserted.returncode == 0, inserted.stderr
    words = inserted.stdout.split()
    assert words[:2] == ["inserted", "job"]
    assert words[3:] == ["on", "queue", "signup"]
    job_id = int(words[2])

    worked = _run(quickstart, env, "-m", "wai", "worker", "myapp:client", "--burst")
    assert worked.returncode == 0, worked.stderr
    assert "welcome 8" in worked.stdout.splitlines()
    assert "queues signup" in worked.stderr

    with wai.Client(empty_database_url) as client:
        assert client.get_job(job_id).state == wai.JobState.COMPLETED
    assert not (quickstart / "embedded").exists()
    assert "embedded" not in migrated.stderr + worked.stderr


def test_quickstart_as_one_script(empty_database_url: str, quickstart: Path) -> None:
    env = _env(empty_database_url, quickstart)
    log = quickstart / "stderr.txt"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-u", "myapp.py"], cwd=quickstart, env=env, text=True,
            stdout=subprocess.PIPE, stderr=stderr,
        )  # fmt: skip
    lines: list[str] = []
    welcomed = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.strip() == "welcome 7":
                welcomed.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert welcomed.wait(60), f"no 'welcome 7' in {lines}; stderr: {log.read_text()}"
        # The job may run while client.run() is still starting, before its Ctrl-C handler
        # is in place; the process's runtime record is written last thing in start().
        with wai.Client(empty_database_url) as client:
            for _ in range(600):
                if client.list_runtime_instances():
                    break
                time.sleep(0.05)
        proc.send_signal(signal.SIGINT)  # Ctrl-C: a graceful shutdown
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()

    with wai.Client(empty_database_url) as client:
        (job,) = client.list_jobs(kind="signup")
    assert job.state == wai.JobState.COMPLETED
    assert job.queue == "signup"
    assert job.max_attempts == 10  # the task's
