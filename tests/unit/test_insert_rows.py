"""The insert statements' shapes and parameters, and the positional row decoder."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID

import pytest

from tests.factories import HOSTILE, Counter, SendEmail
from wai._db_async import _batch_params, job_params  # pyright: ignore[reportPrivateUsage]
from wai._inserts import EnqueueRequest, NewJob, build_job
from wai._job import INSERT_COLUMNS, ROW_COLUMNS, JobRow, JobState, Trigger
from wai._sql import QUERIES
from wai._unique import UniqueOpts

INSERTS = ("job_insert", "job_insert_unique", "job_insert_many", "job_insert_many_unique")


@pytest.mark.parametrize("name", INSERTS)
def test_insert_queries_return_the_insert_columns_in_order(name: str) -> None:
    returning = QUERIES[name].text.split("RETURNING", 1)[1]
    columns = [item.split()[0] for item in returning.split(",")[: len(INSERT_COLUMNS)]]
    assert columns == list(INSERT_COLUMNS)


@pytest.mark.parametrize("plain", ["job_insert", "job_insert_many"])
def test_insert_variants_differ_only_by_on_conflict(plain: str) -> None:
    conflict = (
        "ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states)\n"
        "DO NOTHING\n"
    )
    unique = QUERIES[f"{plain}_unique"].text
    assert conflict in unique
    assert unique.replace(conflict, "") == QUERIES[plain].text
    assert "ON CONFLICT" not in QUERIES[plain].text


def _record(**changes: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    rec: dict[str, Any] = {
        "id": 7,
        "kind": "send_email",
        "queue": "default",
        "args": {"to": "a", "n": [1, {"b": None}]},
        "state": "available",
        "priority": 2,
        "attempt": 0,
        "max_attempts": 25,
        "run_at": now,
        "attempted_at": None,
        "heartbeat_at": None,
        "deadline_at": None,
        "finalized_at": None,
        "created_at": now,
        "errors": [],
        "metadata": {},
        "tags": [],
        "unique_key": None,
        "ordering_key": None,
        "callback_id": None,
        "callback_timeout_at": None,
        "run_lease": 0,
        "progress": None,
        "trigger_job_id": None,
        "trigger_run_lease": None,
        "trigger_outcome": None,
        "trigger_spec": None,
        "callback_result": None,
    }
    rec.update(changes)
    return rec


def _as_row(rec: dict[str, Any]) -> tuple[Any, ...]:
    """What the claim and finalize queries return: ROW_COLUMNS, jsonb as text."""
    out: list[Any] = []
    for column in ROW_COLUMNS:
        name, _, cast = column.partition("::")
        value = rec[name]
        out.append(json.dumps(value) if cast == "text" and value is not None else value)
    return tuple(out)


@pytest.mark.parametrize(
    "rec",
    [
        _record(),
        _record(
            state="scheduled",
            args={"big": 2**70, "f": 0.1, "s": HOSTILE, "u": "ü\U0001f680", "z": "\\u0000"},
            errors=[{"error": "boom", "attempt": 1}],
            metadata={"tenant": "acme"},
            tags=["vip", HOSTILE],
            unique_key=b"\x00" * 16,
            ordering_key="k",
            callback_id=UUID(int=5),
            callback_timeout_at=datetime(2030, 1, 1, tzinfo=timezone(timedelta(hours=2))),
            run_lease=3,
            attempt=1,
            progress={"pct": 50},
            trigger_job_id=3,
            trigger_run_lease=1,
            trigger_outcome="completed",
            trigger_spec="then",
            callback_result=[1, "x"],
        ),
        _record(progress=None, callback_result=None, metadata={}, errors=[]),
    ],
)
def test_from_row_equals_from_record(rec: dict[str, Any]) -> None:
    row = JobRow.from_row(_as_row(rec))
    assert row == JobRow.from_record(rec)
    assert row.state is JobState(rec["state"])
    assert isinstance(row.errors, tuple)
    assert isinstance(row.tags, tuple)
    if rec["trigger_job_id"] is not None:
        assert row.trigger == Trigger(job_id=3, run_lease=1, outcome="completed", spec="then")
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.id = 8  # pyright: ignore[reportAttributeAccessIssue]


def test_from_row_ignores_columns_after_the_row_columns() -> None:
    rec = _record()
    assert JobRow.from_row((*_as_row(rec), "")) == JobRow.from_record(rec)


def test_from_row_decodes_fresh_containers() -> None:
    row = _as_row(_record())
    first, second = JobRow.from_row(row), JobRow.from_row(row)
    assert first.metadata == second.metadata == {}
    assert first.metadata is not second.metadata


def _build(request: EnqueueRequest) -> NewJob:
    return build_job(request, default_queue=lambda _kind: None)


def test_batch_params_leave_unset_columns_null() -> None:
    jobs = [_build(EnqueueRequest(Counter(n=i), queue="q")) for i in range(3)]
    params = _batch_params(jobs)
    assert json.loads(params["kind"]) == ["counter"] * 3
    assert json.loads(params["queue"]) == ["q"] * 3
    assert json.loads(params["args"]) == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert json.loads(params["state"]) == ["available"] * 3
    assert json.loads(params["priority"]) == [2] * 3
    assert json.loads(params["max_attempts"]) == [25] * 3
    for name in ("run_at", "tags", "metadata", "unique_key", "unique_states", "ordering_key"):
        assert params[name] is None, name
    assert params["trigger"] is None


def test_batch_params_send_each_set_column() -> None:
    when = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    unique = _build(EnqueueRequest(SendEmail(to="u"), unique=UniqueOpts(), tags=["a", HOSTILE]))
    plain = _build(EnqueueRequest(Counter(n=1), run_at=when, metadata={"m": 1}, ordering_key="o"))
    follow = dataclasses.replace(plain, trigger=(9, 2, "completed", "then"))
    params = _batch_params([unique, plain, follow])
    assert json.loads(params["run_at"]) == [None, when.isoformat(), when.isoformat()]
    assert datetime.fromisoformat(json.loads(params["run_at"])[1]) == when
    assert json.loads(params["tags"]) == [["a", HOSTILE], [], []]
    assert json.loads(params["metadata"]) == [{}, {"m": 1}, {"m": 1}]
    assert unique.unique_key is not None
    assert json.loads(params["unique_key"]) == [unique.unique_key.hex(), None, None]
    assert json.loads(params["unique_states"]) == [unique.unique_states, None, None]
    assert json.loads(params["ordering_key"]) == [None, "o", "o"]
    assert json.loads(params["trigger"]) == [None, None, [9, 2, "completed", "then"]]
    assert json.loads(params["state"]) == ["available", "scheduled", "scheduled"]


def test_single_insert_sends_no_tags_as_null() -> None:
    assert job_params(_build(EnqueueRequest(Counter(n=1))))["tags"] is None
    assert job_params(_build(EnqueueRequest(Counter(n=1), tags=["a"])))["tags"] == ["a"]


def test_build_job_sets_every_field_of_the_new_job() -> None:
    when = datetime.now(UTC) + timedelta(hours=1)
    job = _build(
        EnqueueRequest(
            {"a": 1},
            kind="k",
            queue="q",
            priority=3,
            max_attempts=4,
            run_at=when,
            tags=["t"],
            metadata={"m": 1},
            unique=UniqueOpts(on_conflict="skip"),
            ordering_key="o",
        )
    )
    assert job.unique_key is not None
    assert job == NewJob(
        kind="k",
        queue="q",
        args='{"a":1}',
        state=JobState.SCHEDULED,
        priority=3,
        max_attempts=4,
        run_at=when,
        tags=["t"],
        metadata='{"m":1}',
        unique_key=job.unique_key,
        unique_states=[
            "scheduled",
            "available",
            "running",
            "retryable",
            "waiting_external",
            "completed",
        ],
        on_conflict="skip",
        ordering_key="o",
        trigger=None,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.kind = "other"  # pyright: ignore[reportAttributeAccessIssue]
