"""Text and numbers PostgreSQL cannot store, at the one boundary, on a real database.

Caller input holding a NUL byte or a lone surrogate is refused by every public entry
point with a ValidationError naming the field, before anything is written; text wai
writes itself (a handler's exception, a failing follow-up) is escaped and recorded.
What the checks let through round-trips through PostgreSQL's ``text`` and ``jsonb``.
"""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import orjson
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings

import wai
from tests.factories import SendEmail
from tests.integration._helpers import FLAVORS, Work, fetch, register, serving, wait_job
from tests.integration.test_callbacks import parked
from tests.integration.test_ingress import SECRET, post
from tests.integration.test_outbox import Charge, Refund, claimed_and_abandoned, make_sweeper
from tests.integration.test_outbox import rescue as run_rescue
from tests.unit.test_storable import JSONISH, TEXT
from wai._seconds import MAX_SECONDS
from wai._storable import check_json, check_text
from wai._text import storable
from wai.callbacks import compile_expressions
from wai.callbacks.ingress import create_callback_app

pytestmark = pytest.mark.timeout(120)

OK = SendEmail(to="a@example.com")
#: A run_at PostgreSQL stores but Python cannot read back (year 10000 in UTC).
TOO_LATE = datetime.max.replace(tzinfo=timezone(timedelta(hours=-5)))
#: ... and one before year 1 in UTC.
TOO_EARLY = datetime.min.replace(tzinfo=timezone(timedelta(hours=5)))


def stored_rows(url: str) -> tuple[int, ...]:
    """How many jobs, dead-letter entries, schedules, outbox rows and queues are stored."""
    with psycopg.connect(url, autocommit=True) as conn:
        return tuple(
            conn.execute(
                "SELECT (SELECT count(*) FROM wai.jobs), (SELECT count(*) FROM wai.dlq),"
                " (SELECT count(*) FROM wai.cron_schedules), (SELECT count(*) FROM wai.outbox),"
                " (SELECT count(*) FROM wai.queues)"
            ).fetchone()
            or ()
        )


# -- what passes the checks round-trips through PostgreSQL --------------------------------


def test_checked_values_round_trip_through_text_and_jsonb(shared_database_url: str) -> None:
    with psycopg.connect(shared_database_url, autocommit=True) as conn:

        @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(JSONISH)
        def json_round_trip(value: Any) -> None:
            try:
                check_json(value, "v")
            except wai.ValidationError:
                return
            text = orjson.dumps(value).decode()
            row = conn.execute("SELECT %s::jsonb::text", (text,)).fetchone()
            assert row is not None
            (stored,) = row
            assert json.loads(stored) == orjson.loads(text)

        @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(TEXT)
        def text_round_trip(text: str) -> None:
            try:
                check_text(text, "t")
            except wai.ValidationError:
                # refused exactly when PostgreSQL (or the UTF-8 encoding) would refuse it
                with pytest.raises((psycopg.DataError, UnicodeEncodeError)):
                    conn.execute("SELECT %s::text", (text,))
            else:
                assert conn.execute("SELECT %s::text", (text,)).fetchone() == (text,)
            escaped = storable(text)
            assert conn.execute("SELECT %s::text", (escaped,)).fetchone() == (escaped,)

        json_round_trip()
        text_round_trip()
    assert stored_rows(shared_database_url) == (0, 0, 0, 0, 0)


# -- every entry point refuses unstorable input, naming the field -------------------------

# (method, args, kwargs, the message's start)
Call = tuple[str, tuple[Any, ...], dict[str, Any], str]
CID = uuid.uuid4()

REFUSED: list[Call] = [
    ("insert", ({"a": ["ok", "x\x00"]},), {"kind": "k"}, "args['a'][1]: contains a NUL byte"),
    ("insert", ({"k\ud800": 1},), {"kind": "k"}, "args key 'k\\ud800': contains a lone"),
    ("insert", (SendEmail(to="\ud800"),), {}, "args['to']: contains a lone surrogate"),
    ("insert", (SendEmail(to="\x00"),), {}, "args['to']: contains a NUL byte"),
    ("insert", (OK,), {"metadata": {"m": {"\x00": 1}}}, "metadata['m'] key '\\x00'"),
    ("insert", (OK,), {"tags": ["t", "\ud800"]}, "tags[1]: contains a lone surrogate"),
    ("insert", (OK,), {"ordering_key": "o\x00"}, "ordering_key: contains a NUL byte"),
    ("insert", (OK,), {"kind": "k\x00"}, "invalid job kind"),
    ("insert", (OK,), {"queue": "q\ud800"}, "invalid queue name"),
    ("insert", (OK,), {"run_at": TOO_LATE}, "run_at must lie between"),
    ("insert", (OK,), {"run_at": TOO_EARLY}, "run_at must lie between"),
    ("insert", (OK,), {"unique": wai.UniqueOpts(by_period=math.inf)}, "UniqueOpts.by_period"),
    (
        "insert_many",
        ([OK, wai.EnqueueRequest({"a": "\x00"}, kind="k")],),
        {},
        "args['a']: contains a NUL byte",
    ),
    ("copy_many", ([OK, SendEmail(to="\udc00")],), {}, "args['to']: contains a lone"),
    ("list_jobs", (), {"kind": "k\x00"}, "kind: contains a NUL byte"),
    ("list_jobs", (), {"queue": "\x00"}, "queue: contains a NUL byte"),
    ("list_jobs", (), {"tag": "\ud800"}, "tag: contains a lone surrogate"),
    ("get_cron", ("n\x00",), {}, "schedule name: contains a NUL byte"),
    ("pause_cron", ("\ud800",), {}, "schedule name: contains a lone"),
    ("resume_cron", ("\x00",), {}, "schedule name: contains a NUL byte"),
    ("trigger_cron", ("\x00",), {}, "schedule name: contains a NUL byte"),
    ("delete_cron", ("\udfff",), {}, "schedule name: contains a lone"),
    ("list_dlq", (), {"kind": "\x00"}, "kind: contains a NUL byte"),
    ("list_dlq", (), {"reason": "\ud800"}, "reason: contains a lone surrogate"),
    ("count_dlq", (), {"tag": "t\x00"}, "tag: contains a NUL byte"),
    ("purge_dlq", (), {"kind": "\x00"}, "kind: contains a NUL byte"),
    ("bulk_retry_from_dlq", (), {"tag": "\ud800"}, "tag: contains a lone"),
    ("bulk_retry_from_dlq", (), {"all": True, "run_at": TOO_LATE}, "run_at must lie"),
    ("retry_from_dlq", (1,), {"run_at": TOO_EARLY}, "run_at must lie between"),
    ("move_to_dlq", (1,), {"reason": "r\x00"}, "reason: contains a NUL byte"),
    ("bulk_move_to_dlq", (), {"all": True, "reason": "\ud800"}, "reason: contains a lone"),
    ("complete_external", (CID, {"k": "\x00"}), {}, "callback payload['k']: contains a NUL"),
    ("resume_external", (CID, ["\ud800"]), {}, "callback payload[0]: contains a lone"),
    ("fail_external", (CID, "e\x00"), {}, "error: contains a NUL byte"),
    ("fail_external", (CID, "\udc80"), {}, "error: contains a lone surrogate"),
    ("resolve_callback", (CID, {"\x00": 1}), {}, "callback payload key '\\x00'"),
    ("heartbeat_callback", (CID, math.inf), {}, "timeout must be"),
    ("heartbeat_callback", (CID, math.nan), {}, "timeout must be"),
]


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize(("method", "args", "kwargs", "message"), REFUSED)
async def test_every_entry_point_refuses_unstorable_input_and_writes_nothing(
    shared_database_url: str,
    flavor: str,
    method: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    message: str,
) -> None:
    url = shared_database_url
    if flavor == "async":
        async with wai.AsyncClient(url, max_connections=2) as client:
            with pytest.raises(wai.ValidationError) as info:
                await getattr(client, method)(*args, **kwargs)
    else:
        with (
            wai.Client(url, max_connections=2) as sync_client,
            pytest.raises(wai.ValidationError) as info,
        ):
            await asyncio.to_thread(getattr(sync_client, method), *args, **kwargs)
    assert str(info.value).startswith(message), str(info.value)
    assert stored_rows(url) == (0, 0, 0, 0, 0)


async def insert_two_async(client: wai.AsyncClient, **bad: Any) -> None:
    async with client.transaction() as tx:
        await tx.insert(OK)
        await tx.insert(OK, **bad)


def insert_two_sync(client: wai.Client, **bad: Any) -> None:
    with client.transaction() as tx:
        tx.insert(OK)
        tx.insert(OK, **bad)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_transactional_inserts_refuse_and_write_nothing(
    shared_database_url: str, flavor: str
) -> None:
    url = shared_database_url
    bad = {"metadata": {"note": "\x00"}}
    if flavor == "async":
        async with wai.AsyncClient(url, max_connections=2) as client:
            with pytest.raises(wai.ValidationError, match=r"^metadata\['note'\]"):
                await insert_two_async(client, **bad)
        async with await psycopg.AsyncConnection.connect(url) as conn:
            with pytest.raises(wai.ValidationError, match=r"^tags\[0\]"):
                await wai.bridge.insert_job(conn, OK, tags=["\ud800"])
    else:
        with (
            wai.Client(url, max_connections=2) as sync_client,
            pytest.raises(wai.ValidationError, match=r"^metadata\['note'\]"),
        ):
            insert_two_sync(sync_client, **bad)
        with psycopg.connect(url) as conn, pytest.raises(wai.ValidationError, match=r"^tags\[0\]"):
            wai.bridge.insert_job_sync(conn, OK, tags=["\ud800"])
    assert stored_rows(url) == (0, 0, 0, 0, 0)


@pytest.mark.parametrize(
    ("register_it", "message"),
    [
        (lambda c: c.periodic("n\x00", "* * * * *", OK), "schedule name: contains a NUL"),
        (lambda c: c.periodic("n", "* * * * *", {"a": "\ud800"}, kind="k"), "args['a']"),
        (lambda c: c.periodic("n", "* * * * *", OK, metadata={"\x00": 1}), "metadata key"),
        (lambda c: c.periodic("n", "* * * * *", OK, tags=["\x00"]), "tags[0]"),
        (lambda c: c.task(Work, deadline=math.inf)(lambda job: None), "deadline must be"),
        (lambda c: c.task(Work, max_attempts=True)(lambda job: None), "max_attempts must be"),
        (
            lambda c: c.on_completed_enqueue(Work, lambda a, j: OK, name="s\x00"),
            "spec name: contains a NUL",
        ),
    ],
)
def test_registration_refuses_unstorable_names_args_and_numbers(
    shared_database_url: str, register_it: Callable[[wai.Client], Any], message: str
) -> None:
    client = wai.Client(shared_database_url)
    with pytest.raises(wai.ValidationError) as info:
        register_it(client)
    assert message in str(info.value)
    assert not client.registry.periodics
    assert stored_rows(shared_database_url) == (0, 0, 0, 0, 0)


# -- callbacks of a parked job: refused, the job unchanged --------------------------------


async def snapshot(client: wai.AsyncClient) -> list[tuple[Any, ...]]:
    return [
        *await fetch(client, "SELECT * FROM wai.jobs ORDER BY id"),
        *await fetch(client, "SELECT * FROM wai.outbox"),
    ]


async def test_a_parked_job_is_unchanged_by_refused_resolutions(
    aclient: wai.AsyncClient, sclient: wai.Client
) -> None:
    _row, cid = await parked(aclient)
    before = await snapshot(aclient)
    bad_payload = {"ok": [1, {"deep": "\x00"}]}
    async_calls: list[Callable[[], Any]] = [
        lambda: aclient.complete_external(cid, bad_payload),
        lambda: aclient.resume_external(cid, bad_payload),
        lambda: aclient.fail_external(cid, "\ud800"),
        lambda: aclient.resolve_callback(cid, bad_payload, "complete"),
    ]
    for call in async_calls:
        with pytest.raises(wai.ValidationError, match="contains a"):
            await call()
    async with aclient.transaction() as tx:
        with pytest.raises(wai.ValidationError, match=r"\['deep'\]: contains a NUL"):
            await aclient.complete_external_in_tx(tx, cid, bad_payload)
        with pytest.raises(wai.ValidationError, match=r"^error: contains a NUL"):
            await aclient.fail_external_in_tx(tx, cid, "\x00")
    sync_calls: list[Callable[[], Any]] = [
        lambda: sclient.complete_external(cid, bad_payload),
        lambda: sclient.fail_external(cid, "e\x00"),
        lambda: sclient.resolve_callback(cid, {"\udc00": 1}),
    ]
    for call in sync_calls:
        with pytest.raises(wai.ValidationError, match="contains a"):
            await asyncio.to_thread(call)
    assert await snapshot(aclient) == before


async def test_a_transform_building_unstorable_text_resolves_nothing(
    aclient: wai.AsyncClient,
) -> None:
    _row, cid = await parked(aclient, expressions=compile_expressions(transform='"\\x00"'))
    before = await snapshot(aclient)
    with pytest.raises(wai.ValidationError, match=r"^callback transform result: contains a NUL"):
        await aclient.resolve_callback(cid, {"ok": 1}, "complete")
    assert await snapshot(aclient) == before


async def test_the_ingress_answers_400_naming_the_field(aclient: wai.AsyncClient) -> None:
    _row, cid = await parked(aclient)
    before = await snapshot(aclient)
    app = create_callback_app(aclient, secret=SECRET)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://wai.test"
    ) as http:
        for action, body, message in [
            ("complete", b'{"payload": {"a": ["\\u0000"]}}', "payload['a'][0]: contains a NUL"),
            ("resume", b'{"payload": {"\\ud800": 1}}', "payload key '\\ud800': contains a"),
            ("fail", b'{"error": "boom \\u0000"}', "error: contains a NUL byte"),
            ("fail", b'{"error": "\\udfff"}', "error: contains a lone surrogate"),
        ]:
            response = await post(http, cid, action, body)
            assert response.status_code == 400, response.text
            assert response.json()["error"].startswith(message), response.text
    assert await snapshot(aclient) == before


# -- text wai writes itself is escaped, never dropped -------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_handler_exception_with_nul_and_surrogates_is_recorded_escaped(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    def body(job: wai.Job[Work]) -> None:
        raise ValueError("bad \x00 byte and \ud800 surrogate")

    register(aclient, flavor, body)
    async with serving(aclient):
        row = await aclient.insert(Work(), max_attempts=1)
        failed = await wait_job(aclient, row.id, "failed")
    (entry,) = failed.errors
    assert entry["error"].startswith("ValueError: bad \\x00 byte and \\ud800 surrogate")
    assert "Traceback" not in entry["error"].splitlines()[0]


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_bad_cancel_reason_fails_the_attempt_readably(
    aclient: wai.AsyncClient, flavor: str
) -> None:
    register(aclient, flavor, lambda job: wai.Cancel("closed \x00"))
    async with serving(aclient):
        row = await aclient.insert(Work(), max_attempts=1)
        failed = await wait_job(aclient, row.id, "failed")
    (entry,) = failed.errors
    assert entry["error"].startswith("ValidationError: Cancel(reason): contains a NUL byte")


async def test_a_followup_closure_error_with_nul_is_recorded_escaped(
    aclient: wai.AsyncClient,
) -> None:
    register(aclient, "async", lambda job: None)

    @aclient.on_completed_enqueue(Work)
    def broken(args: Work, job: wai.JobRow) -> SendEmail:
        raise RuntimeError("mail API said \x00")  # (the log of this failure is not escaped)

    async with serving(aclient):
        row = await aclient.insert(Work(), max_attempts=1)
        failed = await wait_job(aclient, row.id, "failed")
    (entry,) = failed.errors
    assert entry["error"].startswith("FollowUpError: ")
    assert "mail API said \\x00" in entry["error"]
    assert failed.state == "failed"
    assert await aclient.list_jobs(kind="send_email") == []


async def test_an_outbox_closure_error_with_nul_is_recorded_escaped(
    aclient: wai.AsyncClient,
) -> None:
    @aclient.on_rescued_enqueue(Charge)
    def refund(args: Charge, job: wai.JobRow, reason: wai.RescueReason) -> Refund:
        raise RuntimeError("payment API \x00 \ud800 down")

    await claimed_and_abandoned(aclient)
    await run_rescue(aclient)
    result = await make_sweeper(aclient).run_once()
    assert (result.dispatched, result.failed) == (0, 1)
    ((attempts, last_error),) = await fetch(aclient, "SELECT attempts, last_error FROM wai.outbox")
    assert attempts == 1
    assert "payment API \\x00 \\ud800 down" in last_error


# -- the longest durations accepted are ones PostgreSQL can add to now() --------------------


async def test_the_longest_delays_and_deadline_accepted_are_stored(
    aclient: wai.AsyncClient,
) -> None:
    def body(job: wai.Job[Work]) -> wai.RetryAfter | wai.Snooze:
        return wai.RetryAfter(MAX_SECONDS) if job.args.n == 1 else wai.Snooze(MAX_SECONDS)

    register(aclient, "async", body, deadline=MAX_SECONDS)
    async with serving(aclient, {"q": wai.QueueConfig(concurrency=2, deadline=MAX_SECONDS)}):
        retried = await aclient.insert(Work(n=1))
        snoozed = await aclient.insert(Work(n=2))
        retry_row = await wait_job(aclient, retried.id, "retryable")
        snooze_row = await wait_job(aclient, snoozed.id, "scheduled")
    for row in (retry_row, snooze_row):
        assert row.run_at.year >= datetime.now().year + 99
