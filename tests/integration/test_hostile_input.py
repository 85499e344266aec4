"""Hostile input to the public producer, admin and callback APIs, as properties.

For arbitrary values (NUL bytes, lone surrogates, deep nesting, huge integers, odd names,
negative, NaN and infinite numbers, unknown ids), each call either stores the value and it
reads back exactly, or raises a :class:`wai.WaiError` that names the offending field — and
a refused call changes nothing in the database. Never a raw driver error.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import uuid
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wai

pytestmark = pytest.mark.timeout(300)

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    database=None,
)

#: Text that likes the characters PostgreSQL refuses and the ones that need escaping.
HOSTILE_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(["\x00", "\ud800", "\udfff", "'", '"', "\\", "%", "é", "😀", "\n"]),
        st.characters(codec="utf-8"),
        st.characters(),
    ),
    max_size=12,
)
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)
JSON = st.recursive(
    st.one_of(NUMBERS, HOSTILE_TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(HOSTILE_TEXT, inner, max_size=4)
    ),
    max_leaves=12,
)
ARGS = st.dictionaries(HOSTILE_TEXT, JSON, max_size=4)


def jobs_fingerprint(url: str) -> tuple[Any, ...]:
    """What a refused call must not change: the jobs, their DLQ, outbox, queues and cron."""
    with psycopg.connect(url, autocommit=True) as conn:
        return tuple(
            conn.execute(f"SELECT count(*), coalesce(max(id), 0) FROM wai.{table}").fetchone()
            for table in ("jobs", "outbox")
        ) + tuple(
            conn.execute(f"SELECT count(*) FROM wai.{table}").fetchone()
            for table in ("dlq", "queues", "cron_schedules")
        )


def _same_json(a: Any, b: Any) -> bool:
    """Equality as JSON reads it back: 1 == 1.0 in jsonb, -0.0 is 0, and a float is the
    decimal number its shortest repr writes (jsonb stores 3.602879701896397e16 as the
    integer 36028797018963970, not as the float's exact binary value)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        if a == b or (math.isnan(a) and math.isnan(b)):
            return True
        return Decimal(repr(a)) == Decimal(repr(b))
    return a == b


def refused(exc: BaseException, *fields: str) -> None:
    """``exc`` is wai's own error and names one of ``fields``."""
    assert isinstance(exc, wai.WaiError), f"not a wai error: {type(exc).__name__}: {exc!r}"
    message = str(exc)
    assert any(f in message for f in fields), f"{message!r} names none of {fields}"


def test_insert_stores_exactly_or_refuses_naming_the_field(sclient: wai.Client) -> None:
    url = sclient.database_url

    @SETTINGS
    @given(
        args=ARGS,
        kind=HOSTILE_TEXT,
        queue=st.one_of(st.none(), HOSTILE_TEXT),
        tags=st.lists(HOSTILE_TEXT, max_size=3),
        metadata=st.one_of(st.none(), st.dictionaries(HOSTILE_TEXT, JSON, max_size=3)),
        priority=st.one_of(st.integers(-(2**40), 2**40), st.sampled_from([1, 2, 3, 4])),
        max_attempts=st.one_of(st.none(), st.integers(-(2**40), 2**40)),
        ordering_key=st.one_of(st.none(), HOSTILE_TEXT),
    )
    def check(
        args: dict[str, Any],
        kind: str,
        queue: str | None,
        tags: list[str],
        metadata: dict[str, Any] | None,
        priority: int,
        max_attempts: int | None,
        ordering_key: str | None,
    ) -> None:
        before = jobs_fingerprint(url)
        try:
            row = sclient.insert(
                args,
                kind=kind,
                queue=queue,
                tags=tags,
                metadata=metadata,
                priority=priority,
                max_attempts=max_attempts,
                ordering_key=ordering_key,
            )
        except Exception as exc:
            refused(
                exc,
                "args",
                "kind",
                "queue",
                "tags",
                "metadata",
                "priority",
                "max_attempts",
                "ordering_key",
            )
            assert jobs_fingerprint(url) == before
            return
        stored = sclient.get_job(row.id)
        assert _same_json(stored.args, args)
        assert stored.kind == kind
        assert list(stored.tags) == tags or sorted(stored.tags) == sorted(tags)
        assert _same_json(stored.metadata, metadata or {})
        assert stored.priority == priority
        assert stored.ordering_key == ordering_key
        # The returned row carries the JSON values as given; the stored ones as jsonb
        # reads them back (a float may come back as the integer it spells).
        assert _same_json(row.args, stored.args)
        assert _same_json(row.metadata, stored.metadata)
        assert dataclasses.replace(stored, args=row.args, metadata=row.metadata) == row

    check()


def test_a_10_mb_string_round_trips(sclient: wai.Client) -> None:
    big = "x" * (10 * 1024 * 1024)
    row = sclient.insert({"blob": big}, kind="big")
    assert sclient.get_job(row.id).args == {"blob": big}


@pytest.mark.parametrize(
    "value",
    [2**64, -(2**64) - 1, 2**200, functools.reduce(lambda acc, _: [acc], range(300), 0)],
    ids=["2**64", "-2**64-1", "2**200", "300 levels deep"],
)
def test_huge_integers_and_deep_nesting_round_trip(sclient: wai.Client, value: Any) -> None:
    row = sclient.insert({"v": value}, kind="k")
    assert sclient.get_job(row.id).args == {"v": value}


@pytest.mark.parametrize(
    "args",
    [{"n": float("nan")}, {"n": float("inf")}, {"k": "a\x00b"}, {"a\ud800": 1}],
    ids=["nan", "inf", "NUL", "surrogate key"],
)
def test_values_json_cannot_store_are_refused_naming_args(
    sclient: wai.Client, args: dict[str, Any]
) -> None:
    before = jobs_fingerprint(sclient.database_url)
    with pytest.raises(wai.ValidationError) as info:
        sclient.insert(args, kind="k")
    refused(info.value, "args")
    assert jobs_fingerprint(sclient.database_url) == before


def test_admin_calls_answer_hostile_parameters_with_wai_errors(sclient: wai.Client) -> None:
    known = sclient.insert({"a": 1}, kind="k", queue="q").id
    url = sclient.database_url

    @SETTINGS
    @given(
        state=st.one_of(st.none(), HOSTILE_TEXT, st.sampled_from(["running", "completed"])),
        kind=st.one_of(st.none(), HOSTILE_TEXT),
        queue=st.one_of(st.none(), HOSTILE_TEXT),
        tag=st.one_of(st.none(), HOSTILE_TEXT),
        limit=st.integers(-(2**70), 2**70),
        before_id=st.one_of(st.none(), st.integers(-(2**70), 2**70)),
        job_id=st.integers(-(2**70), 2**70),
    )
    def check(
        state: str | None,
        kind: str | None,
        queue: str | None,
        tag: str | None,
        limit: int,
        before_id: int | None,
        job_id: int,
    ) -> None:
        before = jobs_fingerprint(url)
        try:
            rows = sclient.list_jobs(
                state=state, kind=kind, queue=queue, tag=tag, limit=limit, before_id=before_id
            )
        except Exception as exc:
            refused(exc, "state", "kind", "queue", "tag", "limit", "before_id")
        else:
            assert len(rows) <= max(limit, 0)
        for call in (sclient.get_job, sclient.cancel, sclient.retry):
            if job_id == known:
                continue  # a real job: cancelling it is no refusal
            try:
                call(job_id)
            except Exception as exc:
                refused(exc, "job", str(job_id))
        assert jobs_fingerprint(url) == before

    check()


def test_queue_operations_refuse_hostile_names(sclient: wai.Client) -> None:
    url = sclient.database_url

    @SETTINGS
    @given(name=HOSTILE_TEXT)
    def check(name: str) -> None:
        before = jobs_fingerprint(url)
        for call in (sclient.pause_queue, sclient.resume_queue, sclient.drain_queue):
            try:
                call(name)
            except Exception as exc:
                refused(exc, "queue", "name")
            else:
                # a name PostgreSQL can store is an ordinary (empty) queue: nothing else moves
                sclient.resume_queue(name)
        after = jobs_fingerprint(url)
        assert after[0] == before[0]

    check()


def test_callback_resolutions_answer_hostile_ids_and_payloads(sclient: wai.Client) -> None:
    url = sclient.database_url

    @SETTINGS
    @given(
        callback_id=st.one_of(
            st.integers(0, 2**128 - 1).map(lambda i: uuid.UUID(int=i)), HOSTILE_TEXT
        ),
        payload=JSON,
        error=HOSTILE_TEXT,
        timeout=NUMBERS,
    )
    def check(callback_id: Any, payload: Any, error: str, timeout: Any) -> None:
        before = jobs_fingerprint(url)
        calls = [
            lambda: sclient.complete_external(callback_id, payload),
            lambda: sclient.fail_external(callback_id, error),
            lambda: sclient.retry_external(callback_id),
            lambda: sclient.resume_external(callback_id, payload),
            lambda: sclient.heartbeat_callback(callback_id, timeout),
        ]
        for call in calls:
            with pytest.raises(wai.WaiError) as info:
                call()
            assert isinstance(info.value, wai.CallbackNotFound | wai.ValidationError), info.value
        assert jobs_fingerprint(url) == before

    check()


def test_an_unknown_callback_id_is_not_found_whatever_its_form(sclient: wai.Client) -> None:
    for cid in (uuid.uuid4(), str(uuid.uuid4()), "not-a-uuid", "", "\x00"):
        with pytest.raises((wai.CallbackNotFound, wai.ValidationError)):
            sclient.complete_external(cid, {"ok": True})  # type: ignore[arg-type]
