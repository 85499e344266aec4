"""Hostile arguments to the operator CLI: one clean error line, nothing changed.

Invalid UTF-8 on the command line reaches Python as lone surrogates (``\\udcff``): text
PostgreSQL cannot store, which every command must refuse before it reaches the database.
"""

from __future__ import annotations

import re

import pytest

import wai
from tests.acceptance.test_cli import run_wai

BAD_BYTE = "\udcff"  # the byte 0xff on argv, as Python decodes it

CASES = [
    ("jobs", "list", "--kind", BAD_BYTE),
    ("jobs", "list", "--queue", f"q{BAD_BYTE}"),
    ("jobs", "list", "--tag", BAD_BYTE),
    ("jobs", "list", "--state", "runnin"),
    ("jobs", "list", "--limit", "-1"),
    ("jobs", "list", "--limit", "99999999999999999999999"),
    ("jobs", "show", "99999999999999999999999"),
    ("jobs", "show", "-1"),
    ("jobs", "show", "abc"),
    ("jobs", "cancel", "99999999999999999999999"),
    ("jobs", "retry", "0"),
    ("queues", "pause", BAD_BYTE),
    ("queues", "drain", f"mail{BAD_BYTE}"),
    ("queues", "limit", f"mail{BAD_BYTE}", "--rate", "5"),
    ("queues", "limit", "mail", "--rate", "99999999999999999999999"),
    ("queues", "limit", "mail", "--rate", "5", "--per", "1e999"),
    ("queues", "limit", "mail", "--global-concurrency", BAD_BYTE),
    ("queues", "limit", "mail", "--kind", BAD_BYTE, "--rate", "5"),
    ("queues", "limit", "mail", "--kind", f"send_email{BAD_BYTE}", "--no-rate"),
    ("queues", "limit", "mail", "--kind", "send_email", "--rate", "5", "--global-concurrency", "2"),
    ("queues", "limit", "mail", "--kind", "send_email", "--rate", "5", "--burst", BAD_BYTE),
    ("outbox", "retry", "99999999999999999999999"),
    ("dlq", "show", "-5"),
]


@pytest.mark.parametrize(
    "args", CASES, ids=[" ".join(c).encode("unicode_escape").decode() for c in CASES]
)
def test_hostile_arguments_get_one_clean_error_and_change_nothing(
    database_url: str, sclient: wai.Client, args: tuple[str, ...]
) -> None:
    job = sclient.insert({"to": "a"}, kind="send_email", queue="mail")
    result = run_wai("--database-url", database_url, *args)
    assert result.returncode in (1, 2), result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    # wai's own error line, or argparse's usage error ("wai jobs list: error: ...")
    assert re.search(r"^wai( [a-z]+)*: error: ", result.stderr, re.MULTILINE), result.stderr
    assert sclient.get_job(job.id) == job
    assert not any(q.paused for q in sclient.queue_stats())
    assert not any(q.rate_limit or q.global_concurrency for q in sclient.queue_stats())
    assert not any(q.kind_rate_limits for q in sclient.queue_stats())
