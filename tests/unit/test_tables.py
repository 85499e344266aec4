"""The CLI's text tables and JSON conversion, without a database."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from wai._admin import QueueStats
from wai._flow import RateLimit
from wai._job import JobState, Trigger
from wai.cli._tables import (
    cell,
    duration,
    flow_table,
    has_flow,
    json_text,
    jsonable,
    kind_limits_table,
    table,
    when,
)


def test_table_aligns_columns_and_right_aligns_the_last_ones() -> None:
    text = table(["NAME", "N"], [["a", 1], ["long-name", 100]], right=1)
    assert text.splitlines() == [
        "NAME         N",
        "a            1",
        "long-name  100",
    ]


def test_table_with_no_rows_is_the_header() -> None:
    assert table(["ID", "STATE"], []) == "ID  STATE"


def test_cells_flatten_control_characters_and_are_cut() -> None:
    assert cell("a\nb\tc\x00d") == "a b c d"
    assert cell("x" * 100, 10) == "xxxxxxx..."


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (0.01, "0s"), (4.25, "4.2s"), (185, "3m05s"), (7380, "2h03m"), (100_000, "1d03h")],
)
def test_duration(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_when_is_utc_or_a_dash() -> None:
    paris = timezone(timedelta(hours=2))
    assert when(datetime(2024, 5, 1, 14, 0, 3, tzinfo=paris)) == "2024-05-01 12:00:03Z"
    assert when(None) == "-"


def test_jsonable_turns_rows_into_plain_json() -> None:
    at = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    cid = uuid.uuid4()
    value = {
        "state": JobState.RUNNING,
        "at": at,
        "id": cid,
        "key": b"\x01\xff",
        "tags": ("a", "b"),
        "trigger": Trigger(job_id=1, run_lease=2, outcome="completed", spec="s"),
    }
    assert jsonable(value) == {
        "state": "running",
        "at": "2024-05-01T12:00:00+00:00",
        "id": str(cid),
        "key": "01ff",
        "tags": ["a", "b"],
        "trigger": {"job_id": 1, "run_lease": 2, "outcome": "completed", "spec": "s"},
    }
    assert json.loads(json_text(value))["state"] == "running"


def _stats(name: str, **flow: Any) -> QueueStats:
    counts = {s.value: 0 for s in JobState}
    counts["running"] = flow.pop("running", 0)
    return QueueStats(
        name=name, paused=False, paused_at=None, counts=counts, oldest_available_lag=0.0, **flow
    )


def test_the_flow_table_lists_only_the_queues_with_flow_control() -> None:
    stats = [
        _stats("plain", running=4),
        _stats(
            "limited",
            running=3,
            rate_limit=RateLimit(50, per=0.5, burst=10),
            rate_tokens=7.25,
            global_concurrency=5,
        ),
        _stats("keyed", running=1, keys_running=1, waiting_turn=2),
    ]
    assert [has_flow(q) for q in stats] == [False, True, True]
    assert flow_table(stats) == "\n".join(
        [
            "QUEUE    RATE LIMIT        TOKENS  RUNNING  GLOBAL LIMIT  KEYS RUNNING  WAITING TURN",
            "limited  50/0.5s burst 10     7.2        3             5             0             0",
            "keyed    -                      -        1             -             1             2",
        ]
    )
    assert flow_table(stats[:1]) is None
    assert flow_table([]) is None


def test_the_kind_limits_table_lists_each_limited_kind_with_its_tokens() -> None:
    stats = [
        _stats("plain", rate_limit=RateLimit(5)),
        _stats(
            "pay",
            kind_rate_limits={"refund": RateLimit(2, per=60.0), "charge": RateLimit(10, burst=3)},
            kind_tokens={"refund": 0.75, "charge": 3.0},
        ),
        _stats("mail", kind_rate_limits={"send": RateLimit(100)}, kind_tokens={"send": 9.96}),
    ]
    assert kind_limits_table(stats) == "\n".join(
        [
            "QUEUE  KIND    RATE LIMIT       TOKENS",
            "pay    charge  10/1s burst 3       3.0",
            "pay    refund  2/60s burst 1       0.8",
            "mail   send    100/1s burst 10    10.0",
        ]
    )
    assert kind_limits_table(stats[:1]) is None
    assert kind_limits_table([]) is None
