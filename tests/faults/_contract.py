"""Probes, worker processes, polling and the contract every fault test ends with.

The probes are installed in the test database before any worker starts:

- ``runs(job_id, run_lease, pid)``: one row per attempt that reached its handler,
  written by the handler on a connection of its own (``tests.faults._tasks``);
- ``late(job_id, run_lease, pid)``: handlers whose result comes too late write it
  just before they return that result;
- ``finalizations(job_id, run_lease, state)``: an ``AFTER UPDATE`` trigger on
  ``wai.jobs`` logs every change that closes an attempt (``OLD.state = 'running'``
  and the state changes), with the lease of the attempt it closed. It commits or
  rolls back with the change itself, so it logs exactly the outcomes that were applied,
  whoever applied them (the worker's finalizer, or rescue).

:func:`check_contract` then asserts the delivery contract of SPEC §12 after a fault:
no job lost, every job terminal, no attempt finalized twice, no attempt run twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg import sql

import wai

T = TypeVar("T")

PROBES: LiteralString = """
CREATE TABLE runs (
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    pid int NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE late (
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    pid int NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE finalizations (
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    state text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION log_finalization() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.finalizations (job_id, run_lease, state)
    VALUES (OLD.id, OLD.run_lease, NEW.state::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER log_finalization AFTER UPDATE ON wai.jobs FOR EACH ROW
    WHEN (OLD.state = 'running' AND NEW.state IS DISTINCT FROM OLD.state)
    EXECUTE FUNCTION log_finalization();
"""

#: Test-only: each row a session named ``app`` completes costs ``seconds`` of server time,
#: so that session's finalize transactions stay open long enough to be killed mid-way.
#: The sequence (not transactional) counts the completions it started to write, committed
#: or not.
SLOW_FINALIZE: LiteralString = """
CREATE SEQUENCE slow_finalize_rows;
CREATE FUNCTION slow_finalize() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('application_name') = TG_ARGV[0] THEN
        PERFORM nextval('public.slow_finalize_rows');
        PERFORM pg_sleep(TG_ARGV[1]::float8);
    END IF;
    RETURN NEW;
END
$$;
"""


class Db:
    """The test's own access to a database: a fresh connection per statement.

    Pool-free on purpose: the server may be restarted and sessions terminated under
    the test, and a statement that hits such a moment is simply retried.
    """

    def __init__(self, url: str) -> None:
        self.url = url

    async def rows(self, query: LiteralString, params: Any = None) -> list[tuple[Any, ...]]:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + 60
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, application_name="fault-test", connect_timeout=5
                ) as conn:
                    cur = await conn.execute(query, params)
                    return await cur.fetchall() if cur.description else []
            except psycopg.OperationalError:
                if loop.time() > give_up:
                    raise
                await asyncio.sleep(0.2)

    async def value(self, query: LiteralString, params: Any = None) -> Any:
        return (await self.rows(query, params))[0][0]

    async def install_probes(self) -> None:
        await self.rows(PROBES)

    async def slow_finalize(self, app: str, seconds: float) -> None:
        """Make every completion written by sessions named ``app`` sleep ``seconds``."""
        await self.rows(SLOW_FINALIZE)
        await self.rows(
            sql.SQL(  # type: ignore[arg-type]
                "CREATE TRIGGER slow_finalize BEFORE UPDATE ON wai.jobs FOR EACH ROW"
                " WHEN (NEW.state = 'completed') EXECUTE FUNCTION slow_finalize({}, {})"
            ).format(sql.Literal(app), sql.Literal(str(seconds)))
        )

    async def slow_followups(self, app: str, seconds: float) -> None:
        """Make every follow-up row inserted by sessions named ``app`` sleep ``seconds``.

        Needs :meth:`slow_finalize` first (it reuses its function), and these rows count
        in :meth:`slow_finalize_rows` too.
        """
        await self.rows(
            sql.SQL(  # type: ignore[arg-type]
                "CREATE TRIGGER slow_followup BEFORE INSERT ON wai.jobs FOR EACH ROW"
                " WHEN (NEW.trigger_job_id IS NOT NULL)"
                " EXECUTE FUNCTION slow_finalize({}, {})"
            ).format(sql.Literal(app), sql.Literal(str(seconds)))
        )

    async def slow_finalize_rows(self) -> int:
        """Completions the slowed sessions started to write (committed or rolled back)."""
        return int(
            await self.value(
                "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM slow_finalize_rows"
            )
        )

    async def insert(self, requests: Iterable[wai.EnqueueRequest], chunk: int = 1000) -> list[int]:
        """Insert jobs in chunks; returns their ids."""
        items = list(requests)
        ids: list[int] = []
        async with wai.AsyncClient(self.url, max_connections=2) as client:
            for start in range(0, len(items), chunk):
                ids += [r.id for r in await client.insert_many(items[start : start + chunk])]
        assert len(ids) == len(items)
        return ids

    async def count(self, where: LiteralString = "true", params: Any = None) -> int:
        return int(await self.value("SELECT count(*) FROM wai.jobs WHERE " + where, params))

    async def job(self, job_id: int) -> wai.JobRow:
        async with wai.AsyncClient(self.url, max_connections=1) as client:
            return await client.get_job(job_id)

    async def listening(self, app: str) -> bool:
        """True once a worker named ``app`` holds its LISTEN session."""
        n = await self.value(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s AND query ILIKE 'LISTEN%%'",
            (app,),
        )
        return int(n) > 0

    async def leader(self) -> tuple[int, str] | None:
        """(OS pid, leader id) of the live maintenance leader; ids are ``host:pid:nonce``."""
        rows = await self.rows("SELECT leader_id FROM wai.leader WHERE expires_at > now()")
        return (int(rows[0][0].split(":")[-2]), rows[0][0]) if rows else None

    async def leader_pid(self) -> int | None:
        found = await self.leader()
        return found[0] if found else None


async def wait_for(
    predicate: Callable[[], Awaitable[T | None]],
    timeout: float,
    *,
    what: str,
    interval: float = 0.1,
    diagnose: Callable[[], str] | None = None,
) -> T:
    """Poll until ``predicate()`` is truthy; generous timeouts, never a timing assertion."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    while True:
        last = await predicate()
        if last:
            return last
        if loop.time() >= deadline:
            extra = f"\n{diagnose()}" if diagnose else ""
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what} (last: {last!r}){extra}"
            )
        await asyncio.sleep(interval)


class Workers:
    """Spawns ``tests.faults.fault_worker`` processes; kills any left at the end."""

    def __init__(self, root: Path, logs: Path) -> None:
        self.root = root
        self.logs = logs
        self.procs: list[asyncio.subprocess.Process] = []

    async def spawn(
        self,
        url: str,
        *queues: str,
        app: str,
        maintenance: bool = True,
        heartbeat: float = 0.5,
        staleness: float = 1.5,
        rescue: float = 0.5,
        election: float = 0.5,
    ) -> asyncio.subprocess.Process:
        args = [
            url, *queues, "--app", app, "--heartbeat", str(heartbeat),
            "--staleness", str(staleness), "--rescue", str(rescue), "--election", str(election),
        ]  # fmt: skip
        if not maintenance:
            args.append("--no-maintenance")
        env = {**os.environ, "PGAPPNAME": app, "PYTHONUNBUFFERED": "1"}
        log = (self.logs / f"{len(self.procs)}-{app}.log").open("wb")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.faults.fault_worker", *args,
            cwd=self.root, env=env, stdout=log, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        log.close()
        self.procs.append(proc)
        return proc

    async def spawn_ready(self, db: Db, url: str, *queues: str, app: str, **options: Any) -> Any:
        """Spawn a worker and wait until it LISTENs."""
        proc = await self.spawn(url, *queues, app=app, **options)
        await wait_for(
            lambda: db.listening(app), 30, what=f"worker {app} to LISTEN", diagnose=self.output
        )
        return proc

    async def kill(self, proc: asyncio.subprocess.Process) -> None:
        """SIGKILL: no shutdown, no resignation, no last outcome."""
        proc.kill()
        assert await asyncio.wait_for(proc.wait(), 10) == -signal.SIGKILL

    async def stop(self, proc: asyncio.subprocess.Process) -> int:
        """SIGTERM, then the exit code of the graceful shutdown.

        A worker that does not exit within 30 s has its thread stacks dumped into its
        log (SIGUSR1 and SIGUSR2, see ``fault_worker``) and fails the test with every log.
        """
        proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(asyncio.shield(proc.wait()), 30)
        except TimeoutError:
            proc.send_signal(signal.SIGUSR1)
            proc.send_signal(signal.SIGUSR2)
            await asyncio.sleep(1)
            raise AssertionError(
                f"worker {proc.pid} still running 30 s after SIGTERM\n{self.output()}"
            ) from None

    def output(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-12000:]}"
            for p in sorted(self.logs.glob("*.log"))
        )

    async def close(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                proc.kill()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 10)


@dataclass
class Outcomes:
    """What the contract check saw, for test-specific assertions afterwards."""

    jobs: dict[int, tuple[str, int, int, list[dict[str, Any]]]]  # id: state, attempt, lease, errors
    finals: dict[int, list[tuple[int, str]]]  # id: [(run_lease, state)] in lease order
    runs: dict[int, list[tuple[int, int]]]  # id: [(run_lease, pid)] in lease order
    states: Counter[str] = field(default_factory=Counter[str])

    def retried(self) -> set[int]:
        """Jobs that needed more than one attempt (a claim after the first)."""
        return {i for i, (_, _, lease, _) in self.jobs.items() if lease > 1}


async def check_contract(
    db: Db,
    inserted: Collection[int],
    *,
    failed: Collection[int] = (),
    handler_runs: bool = True,
) -> Outcomes:
    """Assert the delivery contract after a fault and return what was seen.

    - no job lost: the table holds exactly the inserted jobs;
    - every job terminal: ``completed``, or ``failed`` for the ids in ``failed``
      (exhaustion the test expects), with ``finalized_at`` set;
    - no attempt finalized twice: at most one logged finalization per
      ``(job_id, run_lease)``, and exactly one terminal outcome per job, written by
      its last attempt;
    - every attempt closed without success left exactly one error entry;
    - no attempt ran twice: at most one ``runs`` row per ``(job_id, run_lease)``;
      with ``handler_runs``, the attempt that completed a job really ran its handler.
    """
    expected_ids = set(inserted)
    assert len(expected_ids) == len(inserted), "duplicate ids among the inserted jobs"
    failed_ids = set(failed)
    rows = await db.rows(
        "SELECT id, state::text, attempt, run_lease, errors, finalized_at IS NOT NULL"
        " FROM wai.jobs ORDER BY id"
    )
    jobs = {r[0]: (r[1], r[2], r[3], list(r[4])) for r in rows}
    finals: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for job_id, lease, state in await db.rows(
        "SELECT job_id, run_lease, state FROM finalizations ORDER BY job_id, run_lease, at"
    ):
        finals[job_id].append((lease, state))
    runs: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for job_id, lease, pid in await db.rows(
        "SELECT job_id, run_lease, pid FROM runs ORDER BY job_id, run_lease, at"
    ):
        runs[job_id].append((lease, pid))

    problems: list[str] = []
    lost = expected_ids - jobs.keys()
    extra = jobs.keys() - expected_ids
    if lost:
        problems.append(f"{len(lost)} jobs lost: {sorted(lost)[:10]}")
    if extra:
        problems.append(f"{len(extra)} unexpected job rows: {sorted(extra)[:10]}")
    finalized = {r[0] for r in rows if r[5]}
    for job_id in sorted(expected_ids & jobs.keys()):
        state, _attempt, lease, errors = jobs[job_id]
        want = "failed" if job_id in failed_ids else "completed"
        mine = finals.get(job_id, [])
        leases = [lease_ for lease_, _ in mine]
        terminal = [(lease_, s) for lease_, s in mine if s in ("completed", "failed", "cancelled")]
        if state != want:
            problems.append(f"job {job_id}: state {state}, expected {want}")
        if job_id not in finalized:
            problems.append(f"job {job_id}: finalized_at is not set")
        if len(leases) != len(set(leases)):
            problems.append(f"job {job_id}: an attempt was finalized twice: {mine}")
        if terminal != [(lease, want)]:
            problems.append(
                f"job {job_id}: terminal outcomes {terminal},"
                f" expected one {want!r} at lease {lease}"
            )
        if mine and max(leases) != lease:
            problems.append(f"job {job_id}: finalizations {mine} do not end at lease {lease}")
        unsuccessful = sum(1 for _, s in mine if s != "completed")
        if len(errors) != unsuccessful:
            problems.append(
                f"job {job_id}: {len(errors)} error entries for {unsuccessful} closed"
                f" attempts without success: {errors} / {mine}"
            )
        ran = [lease_ for lease_, _ in runs.get(job_id, [])]
        if len(ran) != len(set(ran)):
            problems.append(f"job {job_id}: an attempt ran its handler twice: {runs[job_id]}")
        if ran and max(ran) > lease:
            problems.append(f"job {job_id}: a handler ran under lease {max(ran)} > {lease}")
        if handler_runs and want == "completed" and lease not in ran:
            problems.append(f"job {job_id}: completed by lease {lease}, which never ran: {ran}")
    assert not problems, f"{len(problems)} contract violations:\n" + "\n".join(problems[:30])
    return Outcomes(
        jobs=jobs,
        finals=dict(finals),
        runs=dict(runs),
        states=Counter(state for state, *_ in jobs.values()),
    )
