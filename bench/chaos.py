"""The chaos soak: a hostile workload with random faults, then an invariant check in SQL.

    python bench/chaos.py --duration 600          # the 10-minute soak
    python bench/chaos.py --duration 60           # the smoke (CI runs a shorter one)
    python bench/chaos.py --duration 120 --seed 7 --poison 0 --keep

It initdb's a throwaway PostgreSQL cluster with PostgreSQL's default settings, starts
``--workers`` ``wai worker`` processes, one ``wai maintenance`` and one ``wai callbacks
serve`` (all loading ``bench.chaos_app:client``), and for ``--duration`` seconds:

- a producer keeps ``--backlog`` jobs available, drawn from a mix (``draw``), each batch
  committed together with its ids in ``chaos.produced``; the first half without poison,
  the second with ``--poison`` of the jobs poisoned;
- a resolver sends signed HTTP callbacks for parked jobs (complete, fail, retry; some
  are left to time out);
- the periodic schedule ``chaos-tick`` fires every second;
- faults are injected round-robin with jitter (``chaos_faults``).

Then the producer stops, the schedule is paused, everything drains with no fault, the
processes stop, and the invariants of ``chaos_check`` are counted. Exit code 1 when any
invariant has a violation, 2 when the soak itself could not run. docs/reliability.md
("The chaos soak") explains what each part does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import os
import random
import secrets
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import chaos_check  # noqa: E402
import httpx  # noqa: E402
import psycopg  # noqa: E402
from chaos_faults import KINDS, Injector  # noqa: E402
from chaos_fleet import Fleet  # noqa: E402
from tests.faults._cluster import PgCluster, bindir, free_port  # noqa: E402
from tests.faults._contract import Db  # noqa: E402

import wai  # noqa: E402
from wai.callbacks.signing import callback_url, sign  # noqa: E402

DBNAME = "wai_chaos"
SCHEDULE = "chaos-tick"
POISONS = ("closure", "nul", "surrogate", "huge_retry")
BATCH = 100

AVAILABLE = "SELECT count(*) FROM wai.jobs WHERE state = 'available'"
#: Callbacks to send: complete and fail at once (they may beat the park, which wai
#: accepts), retry once the job is parked (wai answers 404 to a retry that beats it).
PENDING_CALLBACKS = """
SELECT c.callback_id, c.action, c.job_id FROM chaos.callbacks AS c
WHERE c.resolved_at IS NULL AND c.action <> 'timeout'
  AND (c.action <> 'retry' OR EXISTS (
      SELECT 1 FROM wai.jobs AS j
      WHERE j.id = c.job_id AND j.callback_id = c.callback_id AND j.state = 'waiting_external'))
ORDER BY c.at LIMIT 200
"""
RESOLVED = """
UPDATE chaos.callbacks AS c SET resolved_at = clock_timestamp(), status = r.status
FROM unnest(%s::uuid[], %s::int[]) AS r(id, status) WHERE c.callback_id = r.id
"""
#: Jobs still to finish (a huge RetryAfter is a resting state), and outbox rows a sweeper
#: still has to dispatch (for an outcome with specs, and not failing).
PENDING = """
SELECT (SELECT count(*) FROM wai.jobs AS j LEFT JOIN chaos.produced AS p ON p.job_id = j.id
        WHERE j.state NOT IN ('completed', 'failed', 'cancelled')
          AND NOT (p.poison IS NOT DISTINCT FROM 'huge_retry'
                   AND j.state IN ('retryable', 'scheduled')
                   AND j.run_at > now() + interval '1 hour')),
       (SELECT count(*) FROM wai.outbox AS o
        WHERE o.last_error IS NULL
          AND EXISTS (SELECT 1 FROM chaos.expected_specs AS s
                      WHERE (s.kind, s.outcome) = (o.kind, o.outcome)))
"""
#: The last few unfinished jobs, to say what the drain waits for.
STRAGGLERS = """
SELECT format('%s %s (%s) %s attempt %s/%s, run_at in %s s', j.id, j.kind, p.mode, j.state,
              j.attempt, j.max_attempts, round(extract(epoch FROM j.run_at - now())))
FROM wai.jobs AS j LEFT JOIN chaos.produced AS p ON p.job_id = j.id
WHERE j.state NOT IN ('completed', 'failed', 'cancelled') ORDER BY j.id LIMIT 3
"""
CRON_CURSOR = "SELECT cursor_at FROM wai.cron_schedules WHERE name = %s"
DLQ_ON = """
INSERT INTO wai.queues (name, dlq) VALUES (%s, true) ON CONFLICT (name) DO UPDATE SET dlq = true
"""

#: Errors the soak's own loops outlive: the server restarts under them by design.
TRANSIENT = (psycopg.Error, wai.WaiError, OSError, httpx.HTTPError, TimeoutError)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass
class Options:
    duration: float
    seed: int
    poison: float
    workers: int
    backlog: int
    fault_interval: float
    drain_timeout: float
    keep: bool


def parse_args(argv: Sequence[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--duration", type=float, default=600, help="seconds of load (default 600)")
    p.add_argument("--seed", type=int, default=None, help="seed of every random choice")
    p.add_argument("--poison", type=float, default=0.01, help="poisoned share (default 0.01)")
    p.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--backlog", type=int, default=300, help="available jobs kept (default 300)")
    p.add_argument("--fault-interval", type=float, default=None, help="mean seconds between faults")
    p.add_argument("--drain-timeout", type=float, default=None, help="seconds the drain may take")
    p.add_argument("--keep", action="store_true", help="keep the cluster directory (logs, data)")
    a = p.parse_args(argv)
    interval = a.fault_interval or min(12.0, a.duration / (len(KINDS) + 1))
    drain = a.drain_timeout or max(60.0, min(180.0, a.duration / 3))
    seed = a.seed if a.seed is not None else random.randrange(2**31)
    return Options(a.duration, seed, a.poison, a.workers, a.backlog, interval, drain, a.keep)


# -- the workload -----------------------------------------------------------------------


def draw(rng: random.Random, n: int, poison_rate: float, app: Any) -> tuple[Any, tuple[str, ...]]:
    """One job of the mix: its request, and (kind, mode, poison, queue) for the log."""
    if rng.random() < poison_rate:
        poison = rng.choice(POISONS)
        return _flow(app, n, "ok", poison=poison, max_attempts=3)
    r = rng.random()
    if r < 0.40:
        req = wai.EnqueueRequest(app.Plain(n=n, ms=rng.randint(0, 10)), max_attempts=4)
        return req, ("plain", "ok", "", app.QUEUE)
    if r < 0.62:
        return _flow(app, n, "ok")
    if r < 0.72:
        return _flow(app, n, "retry", fails=rng.randint(1, 2))
    if r < 0.77:
        return _flow(app, n, "exhaust", queue=app.DLQ_QUEUE, max_attempts=2)
    if r < 0.79:
        return _flow(app, n, "exhaust", max_attempts=2)
    if r < 0.82:
        return _flow(app, n, "terminal", queue=rng.choice((app.QUEUE, app.DLQ_QUEUE)))
    if r < 0.88:
        return _flow(app, n, "cancel")
    action = rng.choices(("complete", "fail", "retry", "timeout"), weights=(5, 1.5, 1.5, 2))[0]
    return _flow(app, n, "callback", action=action)


def _flow(
    app: Any,
    n: int,
    mode: str,
    *,
    fails: int = 0,
    action: str = "",
    poison: str = "",
    queue: str | None = None,
    max_attempts: int = 4,
) -> tuple[Any, tuple[str, ...]]:
    queue = queue or app.QUEUE
    args = app.Flow(n=n, mode=mode, fails=fails, action=action, poison=poison)
    req = wai.EnqueueRequest(args, queue=queue, max_attempts=max_attempts)
    return req, ("flow", f"{mode}:{action}" if action else mode, poison, queue)


@dataclass
class Load:
    """What the load phase's loops share: the poison rate of the moment, counters."""

    rng: random.Random
    app: Any
    poison_rate: float = 0.0
    produced: int = 0
    errors: dict[str, int] = field(default_factory=dict[str, int])

    def error(self, where: str, exc: BaseException) -> None:
        key = f"{where}: {type(exc).__name__}"
        self.errors[key] = self.errors.get(key, 0) + 1


async def produce(client: wai.AsyncClient, load: Load, backlog: int, stop: asyncio.Event) -> None:
    """Keep ``backlog`` jobs available; each batch commits with its ids in chaos.produced."""
    while not stop.is_set():
        try:
            async with client._connection() as conn:
                available = int((await (await conn.execute(AVAILABLE)).fetchall())[0][0])
            want = min(BATCH, backlog - available)
            if want <= 0:
                await asyncio.sleep(0.05)
                continue
            await _produce_batch(client, load, want)
        except TRANSIENT as exc:
            load.error("producer", exc)
            await asyncio.sleep(0.2)


async def _produce_batch(client: wai.AsyncClient, load: Load, size: int) -> None:
    drawn = [draw(load.rng, load.produced + i, load.poison_rate, load.app) for i in range(size)]
    async with client.transaction() as tx:
        rows = await tx.insert_many([req for req, _ in drawn])
        columns = list(zip(*(meta for _, meta in drawn), strict=True))
        await tx.execute(chaos_check.RECORD_PRODUCED, ([r.id for r in rows], *map(list, columns)))
    load.produced += len(rows)


# -- the callback resolver --------------------------------------------------------------


@dataclass
class Resolver:
    """Sends the signed callbacks the handlers asked for through the HTTP ingress."""

    client: wai.AsyncClient
    base: str
    secret: bytes
    load: Load

    async def run(self, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient(timeout=10) as http:
            while not stop.is_set():
                try:
                    await self._pass(http)
                except TRANSIENT as exc:
                    self.load.error("resolver", exc)
                await asyncio.sleep(0.2)

    async def _pass(self, http: httpx.AsyncClient) -> None:
        async with self.client._connection() as conn:
            pending = await (await conn.execute(PENDING_CALLBACKS)).fetchall()
        statuses = await asyncio.gather(*(self._send(http, *row) for row in pending))
        done = [(row[0], s) for row, s in zip(pending, statuses, strict=True) if s in (200, 404)]
        if done:
            async with self.client._connection() as conn:
                await conn.execute(RESOLVED, ([d[0] for d in done], [d[1] for d in done]))

    async def _send(self, http: httpx.AsyncClient, cid: Any, action: str, job_id: int) -> int:
        body = {
            "complete": {"payload": {"job": job_id}},
            "fail": {"error": "planned external failure"},
            "retry": {},
        }[action]
        raw = json.dumps(body).encode()
        try:
            response = await http.post(
                callback_url(self.base, cid, action),
                content=raw,
                headers=sign(self.secret, cid, action, raw),
            )
        except httpx.HTTPError as exc:
            self.load.error("resolver", exc)
            return 0
        return response.status_code


# -- the soak ---------------------------------------------------------------------------


@dataclass
class Soak:
    opts: Options
    cluster: PgCluster
    fleet: Fleet
    db: Db
    url: str
    app: Any = None
    unexpected_exits: list[str] = field(default_factory=list[str])

    async def setup(self) -> None:
        self.cluster.init()
        self.cluster.start()
        async with await psycopg.AsyncConnection.connect(
            self.cluster.url(), autocommit=True
        ) as conn:
            await conn.execute(f"CREATE DATABASE {DBNAME}")  # type: ignore[arg-type]
        async with wai.AsyncClient(self.url, max_connections=1) as client:
            await client.migrate()
        await self.db.install_probes()
        await self.db.rows(chaos_check.SCHEMA)
        os.environ["WAI_DATABASE_URL"] = self.url
        self.app = importlib.import_module("bench.chaos_app")
        specs = [
            (kind, outcome, spec.name)
            for (kind, outcome), registered in self.app.client.registry.specs.items()
            for spec in registered
        ]
        await self.db.rows(chaos_check.RECORD_SPECS, [list(c) for c in zip(*specs, strict=True)])
        await self.db.rows(DLQ_ON, (self.app.DLQ_QUEUE,))

    async def start_fleet(self, port: int) -> None:
        for i in range(1, self.opts.workers + 1):
            self.fleet.add_worker(f"chaos-w{i}")
        self.fleet.add_maintenance("chaos-m")
        self.fleet.add_ingress("chaos-ingress", port)
        await self.fleet.start_all()
        for member in self.fleet.workers():
            await self._wait(lambda m=member: self.db.listening(m.name), f"{member.name} LISTEN")
        base = f"http://127.0.0.1:{port}"
        await self._wait(lambda: _http_up(base), "the callback ingress")

    async def _wait(self, predicate: Any, what: str, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while not await predicate():
            dead = self.fleet.dead()
            if dead or time.monotonic() > end:
                tails = "\n".join(f"--- {m.name}\n{self.fleet.tail(m)}" for m in dead)
                raise RuntimeError(f"gave up waiting for {what}\n{tails}")
            await asyncio.sleep(0.1)

    async def watchdog(self, injector: Injector, stop: asyncio.Event) -> None:
        """Restart any process that died on its own (a finding), noting it."""
        while not stop.is_set():
            await asyncio.sleep(1)
            for member in self.fleet.dead():
                if member.name in injector.holding:
                    continue
                code = member.proc.returncode if member.proc else None
                self.unexpected_exits.append(f"{member.name} exited {code}")
                log(f"{member.name} exited by itself ({code}):\n{self.fleet.tail(member)}")
                await self.fleet.start(member)


async def _http_up(base: str) -> bool:
    async with httpx.AsyncClient(timeout=2) as http:
        with contextlib.suppress(httpx.HTTPError):
            await http.get(base + "/")
            return True
    return False


def _now() -> datetime:
    return datetime.now(UTC)


async def run_load(
    soak: Soak, client: wai.AsyncClient, injector: Injector, load: Load, secret: str, port: int
) -> list[chaos_check.Phase]:
    """The load phase: producer, resolver, cron and faults; returns its phases."""
    opts = soak.opts
    loop = asyncio.get_running_loop()
    stop, producer_stop = asyncio.Event(), asyncio.Event()
    resolver = Resolver(client, f"http://127.0.0.1:{port}", secret.encode(), load)
    start, t0 = _now(), loop.time()
    halves = opts.poison > 0
    tasks = [
        asyncio.create_task(produce(client, load, opts.backlog, producer_stop)),
        asyncio.create_task(resolver.run(stop)),
        asyncio.create_task(soak.watchdog(injector, stop)),
        asyncio.create_task(_progress(soak.db, load, stop)),
    ]
    faults = asyncio.create_task(injector.run(t0 + opts.duration))
    middle = start
    if halves:
        await asyncio.sleep(opts.duration / 2)
        middle, load.poison_rate = _now(), opts.poison
        log(f"second half: {opts.poison:.1%} of the jobs are poisoned")
    await asyncio.sleep(max(0.0, t0 + opts.duration - loop.time()))
    producer_stop.set()
    end = _now()
    await faults
    log(f"load over: {load.produced} jobs produced; faults stopped, draining")
    await finish_cron(soak.db, client, end)
    drained = await drain(soak.db, soak.opts.drain_timeout)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    if not drained:
        log("the drain timed out: the checker will show what is left")
    return _phases(start, middle, end, t0, injector, halves)


def _phases(
    start: datetime, middle: datetime, end: datetime, t0: float, injector: Injector, halves: bool
) -> list[chaos_check.Phase]:
    cut = t0 + (middle - start).total_seconds()
    before = sum(1 for at, _ in injector.history if at < cut)
    if not halves:
        return [chaos_check.Phase("load", start, end, len(injector.history))]
    return [
        chaos_check.Phase("first half, no poison", start, middle, before),
        chaos_check.Phase("second half, poison", middle, end, len(injector.history) - before),
    ]


async def _progress(db: Db, load: Load, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await asyncio.sleep(10)
        with contextlib.suppress(*TRANSIENT):
            jobs, outbox = (await db.rows(PENDING))[0]
            log(f"produced {load.produced}; unfinished jobs {jobs}; outbox due {outbox}")
            if 0 < jobs <= 3:
                log("waiting for: " + "; ".join(r[0] for r in await db.rows(STRAGGLERS)))


async def finish_cron(db: Db, client: wai.AsyncClient, end: datetime) -> None:
    """Wait for the schedule to catch up to ``end``, pause it, record the due times."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        cursor = await db.value(CRON_CURSOR, (SCHEDULE,))
        if cursor >= end:
            break
        await asyncio.sleep(0.2)
    for _ in range(100):
        try:
            await client.pause_cron(SCHEDULE)
            break
        except TRANSIENT:
            await asyncio.sleep(0.3)
    await db.rows(chaos_check.RECORD_CRON_DUE, (end, SCHEDULE))


async def drain(db: Db, timeout: float) -> bool:
    """Wait until every job is terminal (or resting) and the outbox has nothing due."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        jobs, outbox = (await db.rows(PENDING))[0]
        if jobs == 0 and outbox == 0:
            return True
        await asyncio.sleep(1)
    return False


async def stop_fleet(fleet: Fleet) -> dict[str, int | None]:
    codes = await asyncio.gather(*(fleet.stop(m) for m in fleet.members.values()))
    return dict(zip(fleet.members, codes, strict=True))


@dataclass
class Teardown:
    """Kills every child process, stops and removes the cluster; once, synchronously.

    It also runs from the SIGINT/SIGTERM handler, which then exits at once: a cancel
    sent into the event loop can be lost (psycopg_pool's waits on Python 3.11), and the
    soak must never leave a cluster or a worker behind.
    """

    cluster: PgCluster
    fleet: Fleet
    keep: bool
    done: bool = False

    def run(self) -> None:
        if self.done:
            return
        self.done = True
        self.fleet.kill_all_now()
        self.cluster.stop()
        if self.keep:
            log(f"kept {self.cluster.root}")
        else:
            self.cluster.remove()

    def on_signal(self, signum: int, _frame: object) -> None:
        print(f"\n{signal.Signals(signum).name}: killing the processes", file=sys.stderr)
        self.run()
        os._exit(128 + signum)

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.on_signal)


async def soak_main(opts: Options) -> int:
    found = bindir()
    if found is None:
        print("PostgreSQL server binaries not found (set WAI_PG_BINDIR)", file=sys.stderr)
        return 2
    cluster = PgCluster(found, settings=(), prefix="wai-chaos-")
    logs = Path(tempfile.mkdtemp(prefix="logs-", dir=cluster.root))
    url = cluster.url(DBNAME)
    secret = secrets.token_hex(24)
    fleet = Fleet(ROOT, url, logs, secret)
    teardown = Teardown(cluster, fleet, opts.keep)
    teardown.install()
    soak = Soak(opts, cluster, fleet, Db(url), url)
    rng = random.Random(opts.seed)
    log(
        f"chaos soak: {opts.duration:.0f} s, seed {opts.seed}, poison {opts.poison:.1%},"
        f" {opts.workers} workers, a fault every ~{opts.fault_interval:.1f} s; in {cluster.root}"
    )
    try:
        await soak.setup()
        port = free_port()
        await soak.start_fleet(port)
        injector = Injector(fleet, cluster, soak.db, random.Random(rng.random()),
                            opts.fault_interval, log)  # fmt: skip
        load = Load(random.Random(rng.random()), soak.app)
        async with wai.AsyncClient(url, max_connections=4) as client:
            phases = await run_load(soak, client, injector, load, secret, port)
        codes = await stop_fleet(fleet)
        log("processes stopped: " + ", ".join(f"{k} {v}" for k, v in codes.items()))
        results = await chaos_check.check(soak.db)
        chaos_check.print_invariants(results)
        await chaos_check.print_summary(soak.db, phases, dict(injector.counts))
        _print_notes(load, soak)
        return 1 if any(r.failed for r in results) else 0
    finally:
        await fleet.close()
        teardown.run()


def _print_notes(load: Load, soak: Soak) -> None:
    exits = ", ".join(soak.unexpected_exits) or "none"
    print(f"processes that exited by themselves: {exits}")
    errors = ", ".join(f"{k} {n}" for k, n in sorted(load.errors.items())) or "none"
    print(f"errors the soak's own loops retried: {errors}")


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_args(argv)
    # the producer's pool reports every reconnection during a restart: expected here
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
    try:
        return asyncio.run(soak_main(opts))
    except Exception:  # the soak itself broke: not a verdict on wai
        traceback.print_exc()
        print("the soak could not run to the end (exit code 2)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
