"""The job list's time range and text search, on both clients, against a real PostgreSQL.

Rows get their ``created_at`` (and kinds a client would refuse) with plain SQL, so the
time bounds are checked on exact instants: inclusive ``created_after``, exclusive
``created_before``, holes left by deleted rows, creation times out of id order within
the slack the id search allows, and beyond it (a transaction left open across a bound),
where the misses are exactly the ones the documentation owns up to.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import wai
from tests.factories import HOSTILE
from tests.integration._helpers import Admin, fetch
from wai._admin import TIME_BOUND_SLACK

pytestmark = pytest.mark.timeout(60)

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def ids(rows: list[wai.JobRow]) -> list[int]:
    return [r.id for r in rows]


async def spaced(client: wai.AsyncClient, n: int, step: timedelta, **options: Any) -> list[int]:
    """``n`` jobs, created ``step`` apart from T0 in id order; their ids."""
    rows = await client.insert_many(wai.EnqueueRequest({"i": i}, kind="work") for i in range(n))
    first = rows[0].id
    await fetch(
        client,
        "UPDATE wai.jobs SET created_at = %s + (id - %s) * %s WHERE id = ANY(%s)",
        (T0, first, step, [r.id for r in rows]),
    )
    return [r.id for r in rows]


async def created(client: wai.AsyncClient) -> dict[int, datetime]:
    """Every job's creation time, by id."""
    return {r[0]: r[1] for r in await fetch(client, "SELECT id, created_at FROM wai.jobs")}


def expected(
    times: dict[int, datetime], after: datetime | None, before: datetime | None
) -> list[int]:
    """The ids a time range holds, newest first: what the listing must answer."""
    return sorted(
        (
            i
            for i, at in times.items()
            if (after is None or at >= after) and (before is None or at < before)
        ),
        reverse=True,
    )


# -- time range ---------------------------------------------------------------------------


async def test_after_is_inclusive_and_before_exclusive(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    job = await spaced(aclient, 10, timedelta(minutes=1))  # job[i] created at T0 + i min

    async def listed(**filters: Any) -> list[int]:
        return ids(await admin("list_jobs", **filters))

    at = [T0 + timedelta(minutes=i) for i in range(10)]
    assert await listed(created_after=at[7]) == [job[9], job[8], job[7]]
    assert await listed(created_before=at[2]) == [job[1], job[0]]
    assert await listed(created_after=at[3], created_before=at[5]) == [job[4], job[3]]
    # consecutive ranges tile: no job in two, none in neither
    halves = await listed(created_before=at[5]) + await listed(created_after=at[5])
    assert sorted(halves) == sorted(job)
    # a microsecond off the instant moves the job out
    micro = timedelta(microseconds=1)
    assert await listed(created_after=at[7] + micro) == [job[9], job[8]]
    assert await listed(created_before=at[2] + micro) == [job[2], job[1], job[0]]
    assert await listed(created_after=at[3] + micro, created_before=at[4]) == []
    # outside everything, or before the table's first job and after its last
    assert await listed(created_after=at[9] + timedelta(days=1)) == []
    assert await listed(created_before=at[0] - timedelta(days=1)) == []
    assert await listed(created_after=at[0] - timedelta(days=365)) == list(reversed(job))
    assert await listed(created_before=at[9] + timedelta(days=365)) == list(reversed(job))
    # in any time zone
    tokyo = at[7].astimezone(timezone(timedelta(hours=9)))
    assert await listed(created_after=tokyo) == [job[9], job[8], job[7]]


async def test_a_time_range_pages_and_combines_with_every_filter(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    job = await spaced(aclient, 12, timedelta(seconds=30))
    await fetch(
        aclient,
        "UPDATE wai.jobs SET state = 'failed', finalized_at = now(), queue = 'billing',"
        " kind = 'charge_card', tags = '{vip}' WHERE id = ANY(%s)",
        ([job[4], job[6], job[9]],),
    )
    after, before = T0 + timedelta(seconds=60), T0 + timedelta(seconds=300)  # jobs 2..9

    async def listed(**filters: Any) -> list[int]:
        return ids(await admin("list_jobs", created_after=after, created_before=before, **filters))

    assert await listed() == [job[i] for i in (9, 8, 7, 6, 5, 4, 3, 2)]
    assert await listed(state="failed") == [job[9], job[6], job[4]]
    assert await listed(state="available") == [job[i] for i in (8, 7, 5, 3, 2)]
    assert await listed(kind="charge_card", queue="billing", tag="vip") == [job[9], job[6], job[4]]
    assert await listed(search="CHARGE") == [job[9], job[6], job[4]]
    assert await listed(search=str(job[5])) == [job[5]]
    assert await listed(search=str(job[11])) == []  # that job is outside the range
    assert await listed(before_id=job[6]) == [job[5], job[4], job[3], job[2]]
    assert await listed(after_id=job[6]) == [job[9], job[8], job[7]]
    assert await listed(after_id=job[3], before_id=job[8]) == [job[i] for i in (7, 6, 5, 4)]
    walked: list[int] = []
    before_id = None
    while page := await listed(limit=3, before_id=before_id):
        assert len(page) <= 3
        walked += page
        before_id = page[-1]
    assert walked == [job[i] for i in (9, 8, 7, 6, 5, 4, 3, 2)]


async def test_holes_left_by_deleted_rows_change_nothing(aclient: wai.AsyncClient) -> None:
    await spaced(aclient, 300, timedelta(seconds=1))
    # retention took the oldest, an operator purged a stretch, and rows went here and there
    await fetch(
        aclient,
        "DELETE FROM wai.jobs WHERE id IN (SELECT id FROM wai.jobs ORDER BY id LIMIT 40)"
        " OR id IN (SELECT id FROM wai.jobs ORDER BY id OFFSET 120 LIMIT 90)"
        " OR id % 7 = 3",
    )
    times = await created(aclient)
    seconds = (-5, 0, 39, 40, 41, 100, 159, 160, 161, 209, 210, 211, 250, 299, 300, 400)
    bounds = [None, *(T0 + timedelta(seconds=s) for s in seconds)]
    for after in bounds:
        for before in bounds:
            if after is not None and before is not None and after >= before:
                continue
            got = await aclient.list_jobs(created_after=after, created_before=before, limit=1000)
            assert ids(got) == expected(times, after, before), (after, before)


async def test_creation_times_out_of_id_order_within_the_slack_are_exact(
    aclient: wai.AsyncClient,
) -> None:
    # Transactions that began up to 4 s before they inserted: ids out of creation order.
    job = await spaced(aclient, 200, timedelta(seconds=1))
    await fetch(
        aclient,
        "UPDATE wai.jobs SET created_at = created_at - (id * 3 %% 4) * interval '1.3 seconds'"
        " WHERE id = ANY(%s)",
        (job,),
    )
    times = await created(aclient)
    assert sorted(times, key=times.__getitem__) != sorted(times)  # out of order indeed
    assert TIME_BOUND_SLACK > 4
    for s in range(-2, 203, 3):
        after = T0 + timedelta(seconds=s, milliseconds=500)
        before = after + timedelta(seconds=17)
        got = await aclient.list_jobs(created_after=after, limit=1000)
        assert ids(got) == expected(times, after, None), after
        got = await aclient.list_jobs(created_before=before, limit=1000)
        assert ids(got) == expected(times, None, before), before
        got = await aclient.list_jobs(created_after=after, created_before=before, limit=1000)
        assert ids(got) == expected(times, after, before), (after, before)


async def test_a_transaction_open_across_a_bound_misses_only_what_the_docs_say(
    aclient: wai.AsyncClient,
) -> None:
    # One job's transaction began 60 s before it inserted (its created_at is 60 s older
    # than its neighbours'): the one case ids do not follow creation times.
    job = await spaced(aclient, 400, timedelta(seconds=1))
    late = job[250]
    await fetch(
        aclient, "UPDATE wai.jobs SET created_at = created_at - interval '60 seconds'"
        " WHERE id = %s", (late,)
    )  # fmt: skip
    times = await created(aclient)
    for s in range(150, 300, 2):
        bound = T0 + timedelta(seconds=s, milliseconds=500)
        # created_after: only jobs inserted between the bound and the late insert, newer
        # than the bound and older than the late job, may be missed
        listed = set(ids(await aclient.list_jobs(created_after=bound, limit=1000)))
        owed = set(expected(times, bound, None))
        assert listed <= owed, "a job outside the bound"
        may_miss = (
            {i for i in owed if i < late} if times[late] < bound - timedelta(seconds=5) else set()
        )
        assert owed - listed <= may_miss, bound
        # created_before: only the late job itself may be missed
        listed = set(ids(await aclient.list_jobs(created_before=bound, limit=1000)))
        owed = set(expected(times, None, bound))
        assert listed <= owed, "a job outside the bound"
        assert owed - listed <= {late}, bound


async def test_jobs_with_the_same_creation_time_and_an_empty_table(
    aclient: wai.AsyncClient,
) -> None:
    assert await aclient.list_jobs(created_after=T0, created_before=T0 + timedelta(days=1)) == []
    job = await spaced(aclient, 50, timedelta(0))  # one insert_many: one transaction's time
    assert ids(await aclient.list_jobs(created_after=T0)) == list(reversed(job))
    assert await aclient.list_jobs(created_before=T0) == []
    assert await aclient.list_jobs(created_after=T0 + timedelta(microseconds=1)) == []


# -- search ---------------------------------------------------------------------------------


async def kinds(client: wai.AsyncClient, *names: str) -> dict[str, int]:
    """One job per kind, inserted in order (names a client would refuse set by SQL)."""
    found: dict[str, int] = {}
    for name in names:
        row = await client.insert({}, kind="placeholder")
        await fetch(client, "UPDATE wai.jobs SET kind = %s WHERE id = %s", (name, row.id))
        found[name] = row.id
    return found


async def test_search_matches_kinds_case_insensitively_and_literally(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    k = await kinds(
        aclient,
        "send_email",
        "SendEmail",
        "billing.charge_card",
        "sendXemail",
        "50%_off",
        "50 off",
        "back\\slash",
        "backslash",
        "ÉTÉ_report",
    )

    async def found(text: str) -> list[str]:
        by_id = {v: name for name, v in k.items()}
        return [by_id[r.id] for r in await admin("list_jobs", search=text)]

    assert await found("email") == ["sendXemail", "SendEmail", "send_email"]
    assert await found("EMAIL") == ["sendXemail", "SendEmail", "send_email"]
    assert await found("d_e") == ["send_email"]  # "_" is no wildcard: "sendXemail" stays out
    assert await found("_") == ["ÉTÉ_report", "50%_off", "billing.charge_card", "send_email"]
    assert await found("%") == ["50%_off"]
    assert await found("50%") == ["50%_off"]
    assert await found("0 o") == ["50 off"]
    assert await found("\\") == ["back\\slash"]
    assert await found("k\\s") == ["back\\slash"]
    assert await found("ÉTÉ") == ["ÉTÉ_report"]
    assert await found("été") == []  # case is folded for ASCII letters only
    assert await found("charge_card") == ["billing.charge_card"]
    assert await found(".") == ["billing.charge_card"]
    assert await found("nothing") == []
    assert await found(HOSTILE) == []


async def test_search_by_number_finds_the_job_and_kinds_holding_it(
    aclient: wai.AsyncClient, admin: Admin
) -> None:
    job = await aclient.insert({}, kind="work")
    k = await kinds(aclient, f"v{job.id}_task", "other")
    assert ids(await admin("list_jobs", search=str(job.id))) == [k[f"v{job.id}_task"], job.id]
    assert ids(await admin("list_jobs", search=f"#{job.id}")) == [k[f"v{job.id}_task"], job.id]
    assert ids(await admin("list_jobs", search=str(k["other"]))) == [k["other"]]
    assert ids(await admin("list_jobs", search=f"{job.id}", kind="work")) == [job.id]
    assert ids(await admin("list_jobs", search=f"{job.id}", state="failed")) == []
    assert await admin("list_jobs", search="999999999") == []
    assert await admin("list_jobs", search="99999999999999999999") == []  # beyond any id


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"search": "a\x00b"}, "search: contains a NUL byte"),
        ({"search": "\udc80"}, "search: contains a lone surrogate"),
        ({"search": "x" * 201}, "search must be 1 to 200 characters"),
        ({"search": "x" * 5_000_000}, "search must be 1 to 200 characters"),
        ({"search": ""}, "search must be 1 to 200 characters"),
        ({"search": 12}, "search must be a string"),
        ({"created_after": datetime(2026, 5, 1)}, "created_after must be timezone-aware"),
        ({"created_before": datetime(2026, 5, 1)}, "created_before must be timezone-aware"),
        ({"created_after": "2026-05-01T00:00:00Z"}, "must be a datetime with a time zone"),
        ({"created_after": T0, "created_before": T0}, "must be earlier than created_before"),
        ({"after_id": 2**64}, "after_id must be a 64-bit integer"),
        ({"after_id": "1"}, "after_id must be a 64-bit integer"),
    ],
)
async def test_hostile_filters_are_a_clear_validation_error(
    shared_database_url: str, filters: dict[str, Any], message: str
) -> None:
    async with wai.AsyncClient(shared_database_url, max_connections=2) as client:
        with pytest.raises(wai.ValidationError, match=message):
            await client.list_jobs(**filters)
    with (
        wai.Client(shared_database_url, max_connections=2) as sync,
        pytest.raises(wai.ValidationError, match=message),
    ):
        sync.list_jobs(**filters)
