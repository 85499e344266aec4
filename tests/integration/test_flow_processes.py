"""Flow control across real worker processes: rate limits, global concurrency, per-key order.

The workers run ``tests/integration/proc_flow_worker.py`` (``AsyncClient.run`` with small
timings; a queue's limits come from its ``QueueConfig`` or from
``client.set_queue_limits``). The ``flow_span`` handler records each attempt it runs in
the table ``spans`` (start and end from the database's ``clock_timestamp()``), so the
tests can compare what really ran at once with what the limits allow.

What is provable, and asserted exactly:

- an attempt's handler runs inside the attempt's ``running`` interval in the database
  (it starts after the claim commits, it records its end before its outcome is
  written). A rescue closes an attempt at its error entry's ``at`` (the rescue's
  transaction start, before its commit) whatever its handler still does, so an attempt
  counts from its recorded start to its rescue when it was rescued, else to its
  recorded end;
- a limited claim counts, under its queue's lock, every attempt claimed before it;
  ``attempted_at`` is its statement's time, after the lock, so claims serialized by the
  lock have increasing times and over any one-second window of ``attempted_at`` a
  ``RateLimit(limit, per=1, burst)`` allows at most ``limit + burst`` attempts. Under a
  global concurrency ``N`` no instant has more than ``N`` attempts running: the latest
  claim among those running then saw all the others running, and counted them;
- a limit set at run time holds for every claim whose statement started after
  ``set_queue_limits`` returned (its snapshot sees the limit, and a claim that does not
  take the queue's lock takes nothing from a limited queue); a claim under way then
  finishes under the old limits, so the tests tell the two apart by ``attempted_at``.

Only the rate test asserts a throughput, the one the feature promises (about
``limit`` a second); every other wait is a generous timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, LiteralString

import psycopg
import pytest

import wai
from tests.integration._helpers import count, db_now, fetch, wait_for
from tests.integration.test_processes import Workers, listeners

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

WORKER = Path(__file__).with_name("proc_flow_worker.py")


@dataclass
class FlowTick:
    """Same shape as ``proc_flow_worker.FlowTick``: kind ``flow_tick``."""

    n: int = 0


@dataclass
class FlowSpan:
    """Same shape as ``proc_flow_worker.FlowSpan``: kind ``flow_span``."""

    seconds: float
    key: str = ""
    n: int = 0
    fail_first: bool = False


SPANS: LiteralString = """
CREATE TABLE spans (
    job_id bigint NOT NULL,
    attempt int NOT NULL,
    run_lease bigint NOT NULL,
    pid int NOT NULL,
    key text NOT NULL,
    n int NOT NULL,
    started timestamptz NOT NULL,
    ended timestamptz,
    PRIMARY KEY (job_id, run_lease)
)
"""

#: Every rescued attempt of a queue's jobs: (job_id, attempt, at, reason).
RESCUED: LiteralString = """
SELECT j.id, (e->>'attempt')::int, (e->>'at')::timestamptz, e->>'rescued'
FROM wai.jobs AS j CROSS JOIN LATERAL jsonb_array_elements(j.errors) AS e
WHERE j.queue = %(queue)s AND e ? 'rescued'
"""

#: The recorded attempts of a queue's jobs as the database bounds them: from the handler's
#: start to the attempt's rescue if it was rescued, else to the handler's recorded end
#: (NULL: not ended yet).
EFFECTIVE: LiteralString = """
WITH rescued AS (
    SELECT j.id AS job_id, (e->>'attempt')::int AS attempt, (e->>'at')::timestamptz AS at
    FROM wai.jobs AS j CROSS JOIN LATERAL jsonb_array_elements(j.errors) AS e
    WHERE j.queue = %(queue)s AND e ? 'rescued'
),
spans_eff AS (
    SELECT s.job_id, s.pid, s.started, coalesce(r.at, s.ended) AS ended, j.attempted_at
    FROM spans AS s
    JOIN wai.jobs AS j ON j.id = s.job_id AND j.queue = %(queue)s
    LEFT JOIN rescued AS r ON r.job_id = s.job_id AND r.attempt = s.attempt
)
"""

#: The most effective intervals that hold one instant: the count is highest at some
#: interval's start, so counting at every start finds it. The intervals are those whose
#: job's attempted_at is at least %(since)s (the attempts these tests make run once).
MAX_OVERLAP: LiteralString = (
    EFFECTIVE
    + """
, chosen AS (SELECT * FROM spans_eff WHERE attempted_at >= %(since)s)
SELECT coalesce(max((
    SELECT count(*) FROM chosen AS b
    WHERE b.started <= a.started AND (b.ended IS NULL OR b.ended > a.started))), 0)
FROM chosen AS a
"""
)

#: For each attempt, the attempts that started in [its attempted_at, + 1 s): the most any
#: one-second window of the queue's attempted_at holds (timestamps have microseconds).
MAX_WINDOW: LiteralString = """
SELECT coalesce(max(n), 0) FROM (
    SELECT count(*) OVER (
        ORDER BY attempted_at
        RANGE BETWEEN CURRENT ROW AND '999999 microseconds'::interval FOLLOWING) AS n
    FROM wai.jobs
    WHERE queue = %(queue)s AND attempted_at >= %(since)s AND attempted_at < %(until)s
) AS w
"""


class FlowWorkers(Workers):
    """Worker processes of ``proc_flow_worker.py``; none outlives the test."""

    async def launch(
        self,
        *queues: str,
        rate: tuple[str, ...] = (),
        caps: tuple[str, ...] = (),
        fast_rescue: bool = False,
    ) -> asyncio.subprocess.Process:
        """Start a worker serving ``queues`` (``NAME=N``), with flow control from ``rate``
        (``NAME=LIMIT/PER/BURST``) and ``caps`` (``NAME=N``) in its QueueConfig.

        ``fast_rescue``: this process, when it leads, rescues a dead worker's attempts
        within seconds (staleness 3 s), yet not a live one whose heartbeat (every 0.2 s) a
        loaded machine delayed for a moment; it takes the lead over within about a second.
        """
        options = [f"--rate={r}" for r in rate] + [f"--global={c}" for c in caps]
        if fast_rescue:
            options += ["--staleness=3", "--rescue=0.25", "--election=0.5"]
        log = (self.logs / f"worker-{len(self.procs)}.log").open("wb")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER),
            self.url,
            *queues,
            *options,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
        log.close()
        self.procs.append(proc)
        return proc


@pytest.fixture
async def flow_workers(database_url: str, tmp_path: Path) -> AsyncIterator[FlowWorkers]:
    w = FlowWorkers(database_url, tmp_path)
    try:
        yield w
    finally:
        await w.close()


class Sampler:
    """Runs one query every ``every`` seconds on a connection of its own; keeps each row."""

    def __init__(self, url: str, query: LiteralString, params: Any = None, every: float = 0.02):
        self.url = url
        self.query: LiteralString = query
        self.params = params
        self.every = every
        self.rows: list[tuple[Any, ...]] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            while True:
                cur = await conn.execute(self.query, self.params)
                row = await cur.fetchone()
                assert row is not None
                self.rows.append(tuple(row))
                await asyncio.sleep(self.every)

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> list[tuple[Any, ...]]:
        """Stop sampling; a query that failed raises here."""
        task, self._task = self._task, None
        if task is not None:
            if task.done():
                task.result()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        return self.rows

    async def wait(
        self, check: Callable[[tuple[Any, ...]], bool], timeout: float, what: str
    ) -> tuple[Any, ...]:
        """The first sample from now on that satisfies ``check``."""
        seen = len(self.rows)

        def found() -> tuple[Any, ...] | None:
            assert self._task is not None
            if self._task.done():
                self._task.result()
            for row in self.rows[seen:]:
                if check(row):
                    return row
            return None

        return await wait_for(found, timeout, interval=0.02, what=what)


@contextlib.asynccontextmanager
async def sampling(
    url: str, query: LiteralString, params: Any = None, every: float = 0.02
) -> AsyncIterator[Sampler]:
    sampler = Sampler(url, query, params, every)
    sampler.start()
    try:
        yield sampler
    finally:
        await sampler.stop()


async def _busy(aclient: wai.AsyncClient, pid: int, left: float) -> bool:
    """Whether process ``pid`` runs a handler that has ``left`` seconds of its sleep to go
    (it started less than its sleep minus ``left`` ago): a SIGKILL now lands in it."""
    rows = await fetch(
        aclient,
        "SELECT count(*) FROM wai.jobs AS j JOIN spans AS s"
        " ON s.job_id = j.id AND s.run_lease = j.run_lease"
        " WHERE j.state = 'running' AND s.pid = %s AND s.ended IS NULL AND s.started >"
        " clock_timestamp() - make_interval(secs => (j.args->>'seconds')::float8 - %s)",
        (pid, left),
    )
    return rows[0][0] > 0


async def _eq(value: Awaitable[Any], expected: Any) -> bool:
    return (await value) == expected


async def _ready(aclient: wai.AsyncClient, workers: FlowWorkers, n: int) -> None:
    try:
        await wait_for(lambda: _eq(listeners(aclient), n), 30, what=f"{n} workers to LISTEN")
    except AssertionError:
        raise AssertionError(workers.output()) from None


async def _wait(workers: FlowWorkers, check: Callable[[], Any], timeout: float, what: str) -> Any:
    """wait_for, with the workers' logs when it times out."""
    try:
        return await wait_for(check, timeout, interval=0.1, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{workers.output()}") from None


def _figure(name: str, value: Any) -> None:
    """A measured figure, shown with ``pytest -s`` (never asserted on by itself)."""
    print(f"\nflow figure: {name} = {value}")


# -- 1. a rate limit across processes -----------------------------------------------------


async def test_rate_limit_holds_across_four_processes(
    aclient: wai.AsyncClient, flow_workers: FlowWorkers
) -> None:
    """RateLimit(100, per=1, burst=10) over four processes: about 3,000 attempts in 30 s,
    and never more than 110 in any one-second window."""
    limit, burst, seconds = 100, 10, 30
    procs = [
        await flow_workers.launch("rated=20", rate=(f"rated={limit}/1/{burst}",)) for _ in range(4)
    ]
    await _ready(aclient, flow_workers, 4)
    stored = await fetch(
        aclient,
        "SELECT rate_limit, rate_per, rate_burst, global_concurrency FROM wai.queues"
        " WHERE name = 'rated'",
    )
    assert stored == [(limit, 1.0, burst, None)]

    # more than 30 s can start: the queue never runs dry in the window
    jobs = 4000
    await aclient.insert_many(
        [wai.EnqueueRequest(FlowTick(n=i), queue="rated") for i in range(jobs)]
    )

    async def first_attempt() -> datetime | None:
        rows = await fetch(aclient, "SELECT min(attempted_at) FROM wai.jobs WHERE queue = 'rated'")
        return rows[0][0]

    start = await _wait(flow_workers, first_attempt, 20, "the first attempt")
    end = start + timedelta(seconds=seconds)

    async def window_over() -> bool:
        # a second after the window: every claim of it has committed
        return await db_now(aclient) > end + timedelta(seconds=1)

    await _wait(flow_workers, window_over, seconds + 15, "the window to pass")
    assert [await flow_workers.stop(p) for p in procs] == [0] * 4, flow_workers.output()

    started, completed = (
        await fetch(
            aclient,
            "SELECT count(*), count(*) FILTER (WHERE state = 'completed' AND errors = '[]')"
            " FROM wai.jobs WHERE queue = 'rated' AND attempted_at >= %s AND attempted_at < %s",
            (start, end),
        )
    )[0]
    widest = (
        await fetch(
            aclient,
            MAX_WINDOW,
            {"queue": "rated", "since": start, "until": datetime.max.replace(tzinfo=start.tzinfo)},
        )
    )[0][0]
    total = await count(aclient, "queue = 'rated' AND attempted_at IS NOT NULL")
    _figure("attempts started in the 30 s window", started)
    _figure("of them completed", completed)
    _figure("most attempts in a one-second window", widest)
    _figure("attempts in the whole run", total)

    # the window's attempts all ran (no-op handlers, a graceful stop): started = completed
    assert completed == started
    # 100 a second for 30 s, plus the burst once: 3,000 +- 5 %
    assert 2850 <= started <= 3150, started
    # over any second: at most limit + burst, over the whole run, stop included
    assert widest <= limit + burst, widest


# -- 2. global concurrency across processes, and a SIGKILL --------------------------------


#: A sample of queue ``capped``: (time, attempts running, those whose handler runs in the
#: killed process).
SAMPLE_CAPPED: LiteralString = """
SELECT clock_timestamp(), count(*),
       count(*) FILTER (WHERE EXISTS (
           SELECT 1 FROM spans AS s
           WHERE s.job_id = j.id AND s.run_lease = j.run_lease AND s.pid = %(victim)s))
FROM wai.jobs AS j WHERE j.queue = 'capped' AND j.state = 'running'
"""


async def test_global_concurrency_caps_four_processes_and_counts_a_killed_ones_attempts(
    aclient: wai.AsyncClient, flow_workers: FlowWorkers, database_url: str
) -> None:
    """global_concurrency=5 over four processes of ten slots each: never more than five
    running, sampled and from the handlers' records; a SIGKILLed process's attempts stay
    running, counted against the cap, until rescue; then five run at once again."""
    cap = 5
    await fetch(aclient, SPANS)
    procs = [
        await flow_workers.launch("capped=10", caps=(f"capped={cap}",), fast_rescue=True)
        for _ in range(4)
    ]
    victim, survivors = procs[0], procs[1:]
    await _ready(aclient, flow_workers, 4)
    stored = await fetch(
        aclient, "SELECT global_concurrency, rate_limit FROM wai.queues WHERE name = 'capped'"
    )
    assert stored == [(cap, None)]

    since = await db_now(aclient)
    # jobs of 0.2 s, every tenth of 1 s: long enough for the SIGKILL to land in it for sure
    first = [
        wai.EnqueueRequest(FlowSpan(seconds=1.0 if i % 10 == 0 else 0.2, n=i), queue="capped")
        for i in range(250)
    ]
    await aclient.insert_many(first)

    async with sampling(database_url, SAMPLE_CAPPED, {"victim": victim.pid}) as sampler:
        # the victim runs a handler with time left: kill it there
        await _wait(flow_workers, lambda: _busy(aclient, victim.pid, 0.6), 30, "the victim busy")
        victim.kill()
        await asyncio.wait_for(victim.wait(), 10)
        killed_at = await db_now(aclient)

        async def rescued() -> list[tuple[Any, ...]]:
            rows = await fetch(aclient, RESCUED, {"queue": "capped"})
            left = await fetch(
                aclient,
                "SELECT count(*) FROM wai.jobs AS j JOIN spans AS s"
                " ON s.job_id = j.id AND s.run_lease = j.run_lease"
                " WHERE j.queue = 'capped' AND j.state = 'running' AND s.pid = %s",
                (victim.pid,),
            )
            return rows if rows and left[0][0] == 0 else []

        rescues = await _wait(flow_workers, rescued, 30, "the killed attempts to be rescued")
        rescued_at = max(r[2] for r in rescues)
        # fresh work after the rescue: the survivors run `cap` attempts at once again
        more = [
            wai.EnqueueRequest(FlowSpan(seconds=0.2, n=i), queue="capped") for i in range(250, 350)
        ]
        await aclient.insert_many(more)
        recovered = await sampler.wait(
            lambda r: r[0] > rescued_at and r[1] == cap and r[2] == 0,
            30,
            f"{cap} attempts running again after the rescue",
        )

        async def all_done() -> bool:
            return await count(aclient, "queue = 'capped' AND state = 'completed'") == 350

        await _wait(flow_workers, all_done, 90, "every job to complete")
        samples = await sampler.stop()
    assert [await flow_workers.stop(p) for p in survivors] == [0] * 3, flow_workers.output()

    # every rescue of the run (the first one found may have been followed by others)
    rescues = await fetch(aclient, RESCUED, {"queue": "capped"})
    overlap = (await fetch(aclient, MAX_OVERLAP, {"queue": "capped", "since": since}))[0][0]
    unended = await fetch(
        aclient,
        EFFECTIVE + "SELECT count(*) FROM spans_eff WHERE ended IS NULL",
        {"queue": "capped"},
    )
    spans_of_rescued = await fetch(
        aclient,
        "SELECT DISTINCT s.pid FROM spans AS s JOIN (" + RESCUED + ") AS r(job_id, attempt, at,"
        " reason) ON r.job_id = s.job_id AND r.attempt = s.attempt",
        {"queue": "capped"},
    )
    between = [r for r in samples if killed_at < r[0] < rescued_at]
    _figure("samples", len(samples))
    _figure("most attempts running in a sample", max(r[1] for r in samples))
    _figure("killed attempts (rescued)", len(rescues))
    _figure(
        "most running while the killed ones were counted",
        max((r[1] for r in between), default=None),
    )
    _figure("killed attempts still running in those samples", sorted({r[2] for r in between}))
    _figure("most effective intervals at once", overlap)
    _figure("sample with the cap reached after the rescue", recovered)

    # never more than `cap` running, sampled every ~20 ms, the killed attempts included
    assert max(r[1] for r in samples) <= cap
    # until their rescue the killed attempts stay running, counted against the cap
    first_rescue = min(r[2] for r in rescues)
    assert all(r[2] >= 1 for r in samples if killed_at < r[0] < first_rescue)
    # and from what the handlers recorded, the killed attempts lasting until their rescue
    assert overlap <= cap, overlap
    assert unended == [(0,)]
    # the attempts left behind were the victim's, rescued for their stale heartbeat
    assert {r[3] for r in rescues} == {"stale_heartbeat"}
    assert spans_of_rescued in ([], [(victim.pid,)])
    assert all(r[2] > killed_at for r in rescues)
    # their jobs ran again and completed, like every other
    for job_id, attempt, _at, _reason in rescues:
        row = await aclient.get_job(job_id)
        assert (row.state, row.attempt) == ("completed", attempt + 1)


# -- 3. per-key serial execution ----------------------------------------------------------


#: A sample of queue ``keyed``: (time, most attempts running for one key, running jobs
#: without their key_turns row, key_turns rows without their running job).
SAMPLE_KEYED: LiteralString = """
SELECT clock_timestamp(),
       (SELECT coalesce(max(c), 0) FROM (
            SELECT count(*) AS c FROM wai.jobs
            WHERE queue = 'keyed' AND state = 'running' GROUP BY ordering_key) AS k),
       (SELECT count(*) FROM wai.jobs AS j
        WHERE j.queue = 'keyed' AND j.state = 'running' AND NOT EXISTS (
            SELECT 1 FROM wai.key_turns AS t
            WHERE t.queue = j.queue AND t.ordering_key = j.ordering_key AND t.job_id = j.id)),
       (SELECT count(*) FROM wai.key_turns AS t
        WHERE t.queue = 'keyed' AND NOT EXISTS (
            SELECT 1 FROM wai.jobs AS j WHERE j.id = t.job_id AND j.state = 'running'))
"""


async def test_jobs_of_a_key_run_one_at_a_time_in_insert_order_across_processes(
    aclient: wai.AsyncClient, flow_workers: FlowWorkers, database_url: str
) -> None:
    """50 keys x 40 jobs over three processes, with retries and a SIGKILL: per key one
    attempt at a time, in insert order, the killed attempt's key held until its rescue."""
    keys, per_key = 50, 40
    await fetch(aclient, SPANS)
    procs = [await flow_workers.launch("keyed=8", fast_rescue=True) for _ in range(3)]
    victim = procs[0]
    await _ready(aclient, flow_workers, 3)

    def key(k: int) -> str:
        return f"key-{k:02d}"

    # the keys interleaved, each key's jobs in order; some fail their first attempt, and
    # every twentieth takes long enough for the SIGKILL to land in one of them for sure
    slow = 0.8
    items = [
        wai.EnqueueRequest(
            FlowSpan(
                seconds=slow if n % 20 == 10 else 0.005,
                key=key(k),
                n=n,
                fail_first=(n + k) % 8 == 3,
            ),
            queue="keyed",
            ordering_key=key(k),
        )
        for n in range(per_key)
        for k in range(keys)
    ]
    async with aclient.transaction() as tx:
        rows = await tx.insert_many(items)
    total = len(rows)
    assert total == keys * per_key
    assert [r.id for r in rows] == sorted(r.id for r in rows)

    async with sampling(database_url, SAMPLE_KEYED, every=0.05) as sampler:

        async def victim_mid_run() -> bool:
            done = await count(aclient, "queue = 'keyed' AND state = 'completed'")
            return done >= total // 4 and await _busy(aclient, victim.pid, 0.5)

        await _wait(flow_workers, victim_mid_run, 90, "a quarter done and the victim busy")
        victim.kill()
        await asyncio.wait_for(victim.wait(), 10)
        killed_at = await db_now(aclient)
        done_at_kill = await count(aclient, "queue = 'keyed' AND state = 'completed'")
        # a new process takes the dead one's place
        procs.append(await flow_workers.launch("keyed=8", fast_rescue=True))
        await _ready(aclient, flow_workers, 3)

        async def all_done() -> bool:
            return await count(aclient, "queue = 'keyed' AND state = 'completed'") == total

        await _wait(flow_workers, all_done, 120, "every job to complete")
        samples = await sampler.stop()
    assert [await flow_workers.stop(p) for p in procs[1:]] == [0] * 3, flow_workers.output()

    jobs = {
        r[0]: r
        for r in await fetch(
            aclient,
            "SELECT id, ordering_key, (args->>'n')::int, (args->>'fail_first')::bool, attempt,"
            " state::text, finalized_at, errors::text FROM wai.jobs WHERE queue = 'keyed'",
        )
    }
    spans = await fetch(aclient, "SELECT job_id, attempt, pid, key, n, started, ended FROM spans")
    rescues = await fetch(aclient, RESCUED, {"queue": "keyed"})
    _figure("completed when the victim was killed", done_at_kill)
    _figure("attempts recorded", len(spans))
    _figure("killed attempts (rescued)", len(rescues))
    _figure("samples", len(samples))
    _figure("most attempts of one key running in a sample", max(r[1] for r in samples))

    assert len(jobs) == total
    assert {r[5] for r in jobs.values()} == {"completed"}
    assert await fetch(aclient, "SELECT count(*) FROM wai.key_turns") == [(0,)]
    # sampled: one running attempt per key, each with its turn and each turn with its attempt
    assert max(r[1] for r in samples) <= 1
    assert [r for r in samples if r[2] or r[3]] == []
    # the killed attempts were rescued (every rescue here is one of them)
    assert rescues, "the victim had an attempt running: it must have been rescued"
    assert {r[3] for r in rescues} == {"stale_heartbeat"}
    assert all(r[2] > killed_at for r in rescues)
    rescued_at = {(r[0], r[1]): r[2] for r in rescues}
    recorded = {(s[0], s[1]): s for s in spans}
    for job_id, attempt in rescued_at:
        if (job_id, attempt) in recorded:
            assert recorded[job_id, attempt][2] == victim.pid

    # every attempt of every job is accounted for: recorded by its handler, or rescued
    # before its handler recorded it (claimed by the victim just before it died)
    for job_id, (_id, _key, _n, fail_first, attempt, _s, _f, _e) in jobs.items():
        seen = {a for (j, a) in recorded if j == job_id} | {
            a for (j, a) in rescued_at if j == job_id
        }
        assert seen == set(range(1, attempt + 1)), (job_id, seen, attempt)
        if fail_first:
            assert attempt >= 2

    # Per key, in (job's insert order, attempt) order, every attempt starts after every
    # earlier one has ended: its handler's recorded end, or its rescue when it was rescued
    # (a killed attempt lasts until then). That is: never two at once, jobs in insert
    # order, a job's retries before the next job, the next job after the rescue.
    by_key: dict[str, list[tuple[int, int, datetime | None, datetime]]] = defaultdict(list)
    for (job_id, attempt), at in rescued_at.items():
        if (job_id, attempt) not in recorded:
            by_key[jobs[job_id][1]].append((jobs[job_id][2], attempt, None, at))
    for job_id, attempt, _pid, k, n, started, ended in spans:
        end = rescued_at.get((job_id, attempt), ended)
        assert end is not None, ("an attempt neither ended nor rescued", job_id, attempt)
        assert (jobs[job_id][1], jobs[job_id][2]) == (k, n)
        by_key[k].append((n, attempt, started, end))
    assert len(by_key) == keys
    broken: list[Any] = []
    for k, entries in by_key.items():
        entries.sort(key=lambda e: (e[0], e[1]))
        latest: datetime | None = None
        for n, attempt, started, end in entries:
            if started is not None and latest is not None and not started > latest:
                broken.append((k, n, attempt, started, latest))
            latest = end if latest is None else max(latest, end)
    assert broken == []

    # completions follow insert order within each key
    for k in {r[1] for r in jobs.values()}:
        ordered = sorted((r for r in jobs.values() if r[1] == k), key=lambda r: r[0])
        assert [r[2] for r in ordered] == list(range(per_key))
        finals = [r[6] for r in ordered]
        assert all(a < b for a, b in itertools.pairwise(finals)), k


# -- 4. limits set at run time ------------------------------------------------------------


#: A sample of queue ``adjust``: (time, attempts running, of them those claimed before
#: %(since)s).
SAMPLE_ADJUST: LiteralString = """
SELECT clock_timestamp(), count(*), count(*) FILTER (WHERE attempted_at < %(since)s)
FROM wai.jobs WHERE queue = 'adjust' AND state = 'running'
"""


async def test_global_concurrency_set_at_run_time_caps_running_processes_until_lifted(
    aclient: wai.AsyncClient, flow_workers: FlowWorkers, database_url: str
) -> None:
    """set_queue_limits(global_concurrency=2) while three unlimited processes run twelve
    attempts at once: two at a time once those finish; lifted, twelve again."""
    await fetch(aclient, SPANS)
    # no flow control in their configuration: four attempts each, twelve at once
    procs = [await flow_workers.launch("adjust=4") for _ in range(3)]
    await _ready(aclient, flow_workers, 3)
    jobs = 300
    await aclient.insert_many(
        [wai.EnqueueRequest(FlowSpan(seconds=0.25, n=i), queue="adjust") for i in range(jobs)]
    )

    async def running() -> int:
        return await count(aclient, "queue = 'adjust' AND state = 'running'")

    free = await _wait(flow_workers, lambda: _at_least(running(), 6), 30, "6 attempts at once")

    await aclient.set_queue_limits("adjust", global_concurrency=2)
    # every claim whose statement started after this saw the limit
    limited_since = await db_now(aclient)
    assert (
        await fetch(aclient, "SELECT global_concurrency FROM wai.queues WHERE name = 'adjust'")
    ) == [(2,)]

    async with sampling(database_url, SAMPLE_ADJUST, {"since": limited_since}) as sampler:
        # the attempts claimed before the limit finish; then two at a time
        await sampler.wait(lambda r: r[2] == 0 and r[1] == 2, 30, "2 attempts at once, limited")

        async def some_limited_done() -> bool:
            n = await fetch(
                aclient,
                "SELECT count(*) FROM spans AS s JOIN wai.jobs AS j ON j.id = s.job_id"
                " WHERE j.attempted_at >= %s AND s.ended IS NOT NULL",
                (limited_since,),
            )
            return n[0][0] >= 20

        await _wait(flow_workers, some_limited_done, 60, "20 limited attempts to end")
        samples = await sampler.stop()
    # measured before the limit is lifted: every attempt claimed since it was set is limited
    overlap = (await fetch(aclient, MAX_OVERLAP, {"queue": "adjust", "since": limited_since}))[0][0]
    limited = await count(aclient, "queue = 'adjust' AND attempted_at >= %s", (limited_since,))

    await aclient.set_queue_limits("adjust")
    assert (
        await fetch(aclient, "SELECT global_concurrency FROM wai.queues WHERE name = 'adjust'")
    ) == [(None,)]
    lifted = await _wait(flow_workers, lambda: _at_least(running(), 6), 30, "6 at once, lifted")

    async def all_done() -> bool:
        return await count(aclient, "queue = 'adjust' AND state = 'completed'") == jobs

    await _wait(flow_workers, all_done, 90, "every job to complete")
    assert [await flow_workers.stop(p) for p in procs] == [0] * 3, flow_workers.output()

    # samples whose snapshot held no attempt claimed before the limit
    settled = [r for r in samples if r[2] == 0]
    _figure("running before the limit", free)
    _figure("attempts claimed under the limit", limited)
    _figure("samples under the limit, older attempts gone", len(settled))
    _figure("most running in them", max(r[1] for r in settled))
    _figure("most limited attempts at once", overlap)
    _figure("running after the limit was lifted", lifted)

    # once the attempts claimed before the limit are gone, never more than 2 running
    assert max(r[1] for r in settled) <= 2
    # the attempts claimed under the limit never ran more than 2 at once
    assert overlap <= 2, overlap


async def _at_least(value: Awaitable[int], n: int) -> int | None:
    got = await value
    return got if got >= n else None


async def test_rate_limit_set_at_run_time_paces_running_processes_until_lifted(
    aclient: wai.AsyncClient, flow_workers: FlowWorkers
) -> None:
    """set_queue_limits(rate_limit=RateLimit(20, burst=2)) on three running processes that
    claimed without one: at most 22 attempts in any second; lifted, far more."""
    limit, burst = 20, 2
    procs = [await flow_workers.launch("paced=10") for _ in range(3)]
    await _ready(aclient, flow_workers, 3)
    # the workers have claimed (nothing) without a limit; now they are given one
    await aclient.set_queue_limits("paced", rate_limit=wai.RateLimit(limit, per=1.0, burst=burst))
    since = await db_now(aclient)
    jobs = 1000
    await aclient.insert_many(
        [wai.EnqueueRequest(FlowTick(n=i), queue="paced") for i in range(jobs)]
    )

    async def started() -> int:
        return await count(aclient, "queue = 'paced' AND attempted_at IS NOT NULL")

    await _wait(flow_workers, lambda: _at_least(started(), 3 * limit), 60, "3 s of attempts")
    # measured before the limit is lifted: every attempt so far was claimed under it
    before = await db_now(aclient)
    paced = (await fetch(aclient, MAX_WINDOW, {"queue": "paced", "since": since, "until": before}))[
        0
    ][0]
    claimed = await count(aclient, "queue = 'paced' AND attempted_at < %s", (before,))

    lifted_since = await db_now(aclient)
    await aclient.set_queue_limits("paced")

    async def all_done() -> bool:
        return await count(aclient, "queue = 'paced' AND state = 'completed'") == jobs

    await _wait(flow_workers, all_done, 60, "every job to complete")
    assert [await flow_workers.stop(p) for p in procs] == [0] * 3, flow_workers.output()
    free = (
        await fetch(
            aclient,
            MAX_WINDOW,
            {
                "queue": "paced",
                "since": lifted_since,
                "until": datetime.max.replace(tzinfo=since.tzinfo),
            },
        )
    )[0][0]
    _figure("attempts claimed under the limit", claimed)
    _figure("most of them in a one-second window", paced)
    _figure("most in a one-second window after the lift", free)

    assert paced <= limit + burst, paced
    # lifted: the rest went faster than the limit ever lets through
    assert free > limit + burst, free
