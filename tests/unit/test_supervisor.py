"""The supervisor of ``wai worker --processes N``, on tiny stand-in child processes."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from wai import cli
from wai._supervisor import USAGE_ERROR, Supervisor, describe_exit
from wai.cli import worker

pytestmark = pytest.mark.timeout(30)


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


async def test_children_that_finish_are_not_restarted() -> None:
    logs: list[str] = []
    supervisor = Supervisor(_python("pass"), 2, log=logs.append)
    assert await supervisor.run() == 0
    assert sum("started" in line for line in logs) == 2
    assert sum("finished" in line for line in logs) == 2


async def test_a_usage_error_stops_every_child(tmp_path: Path) -> None:
    # child 1 sleeps until signalled; child 2 (and only it) exits with status 2 at once
    code = (
        "import os, signal, sys, time\n"
        f"marker = {str(tmp_path / 'first')!r}\n"
        "try:\n"
        "    fd = os.open(marker, os.O_CREAT | os.O_EXCL)\n"
        "except FileExistsError:\n"
        "    sys.exit(2)\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
        "time.sleep(30)\n"
    )
    logs: list[str] = []
    supervisor = Supervisor(_python(code), 2, log=logs.append)
    assert await asyncio.wait_for(supervisor.run(), 20) == USAGE_ERROR
    assert any("usage error" in line for line in logs), logs


async def test_a_failing_child_is_restarted_with_backoff_until_stopped() -> None:
    logs: list[str] = []
    three = asyncio.Event()

    def log(line: str) -> None:
        logs.append(line)
        if sum("restarting" in seen for seen in logs) >= 3:
            three.set()

    supervisor = Supervisor(_python("import sys; sys.exit(3)"), 1, backoff=0.05, log=log)
    task = asyncio.create_task(supervisor.run())
    await asyncio.wait_for(three.wait(), 10)
    supervisor.stop()
    assert await asyncio.wait_for(task, 10) == 0  # stopped during a backoff
    restarts = [line for line in logs if "restarting" in line]
    assert "exited with status 3; restarting in 0.05 s" in restarts[0]
    assert "restarting in 0.1 s" in restarts[1]  # doubling
    assert "restarting in 0.2 s" in restarts[2]


def test_describe_exit() -> None:
    assert describe_exit(1) == "exited with status 1"
    assert describe_exit(-9) == "was killed by SIGKILL"
    assert describe_exit(-200) == "was killed by signal 200"


def test_processes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="processes"):
        Supervisor(_python("pass"), 0)


def test_child_command_line_repeats_the_worker_options() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(
        [
            "--database-url", "postgresql://secret@db/app", "--schema", "s",
            "worker", "app:client", "-q", "a=2", "--queue", "b", "--burst", "--no-maintenance",
            "--processes", "3", "--poll-interval", "0.5", "--shutdown-timeout", "7",
            "--completed-retention", "60",
        ]
    )  # fmt: skip
    argv = worker._worker_argv(args)  # pyright: ignore[reportPrivateUsage]
    assert argv[:3] == [sys.executable, "-m", "wai"]
    assert "postgresql://secret@db/app" not in argv  # the URL goes in the environment
    assert "--processes" not in argv
    child = parser.parse_args(argv[3:])
    for name in ("schema", "app", "queue", "burst", "maintenance", "shutdown_timeout"):
        assert getattr(child, name) == getattr(args, name), name
    assert (child.poll_interval, child.completed_retention) == (0.5, 60.0)
    assert child.processes is None
    assert child.heartbeat_interval is None  # not given, not passed on


@pytest.mark.parametrize("value", ["0", "-1", "many", "257"])
def test_processes_option_is_checked(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.build_parser().parse_args(["worker", "app:client", "--processes", value])
    assert exc.value.code == 2
    assert "--processes" in capsys.readouterr().err
