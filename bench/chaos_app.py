"""The application the chaos soak's processes load: ``wai worker bench.chaos_app:client``.

Loaded (from the repository root) by the worker, maintenance and callback-ingress
processes that ``bench/chaos.py`` starts; the database URL comes from the CLI
(``WAI_DATABASE_URL``). Every handler first records its attempt in ``runs(job_id,
run_lease, pid)`` on a connection of its own (the probe of ``tests.faults._contract``),
then behaves as its args say:

- ``Plain`` (queue ``chaos``): sleeps ``ms`` milliseconds and completes. No follow-up.
- ``Flow`` (queue ``chaos``, or ``chaos-dlq`` whose failures go to the dead-letter queue):
  a follow-up spec on every outcome (:data:`FLOW_SPECS`, two on ``completed``), and a
  ``mode``: ``ok``; ``retry`` (raises on its first ``fails`` attempts); ``exhaust``
  (always raises); ``terminal`` (raises ``TerminalError``); ``cancel`` (returns
  ``Cancel``); ``callback`` (registers a callback, writes its id to
  ``chaos.callbacks`` for the soak's resolver with the ``action`` it is to take, and
  parks; only its first run lease takes ``action``, later ones ask for ``complete``).
  ``poison`` makes it hostile: ``closure`` (every follow-up closure raises
  ``TypeError``), ``nul`` / ``surrogate`` (it raises errors whose message holds a NUL
  or a lone surrogate), ``huge_retry`` (it returns ``RetryAfter`` of 10^18 s).
- ``FollowUp`` (queue ``chaos-followups``): the follow-ups; no spec of their own.
- ``Tick`` (queue ``chaos``): the periodic schedule ``chaos-tick``, every second,
  ``catch_up``.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool
from tests.faults._tasks import RECORD_RUN

import wai

QUEUE = "chaos"
DLQ_QUEUE = "chaos-dlq"
FOLLOWUP_QUEUE = "chaos-followups"
SCHEDULE = "chaos-tick"
#: Seconds a ``callback`` job's callback waits: ``timeout`` jobs are left to run out.
CALLBACK_TIMEOUT = {"timeout": 2.0}
DEFAULT_CALLBACK_TIMEOUT = 20.0
HUGE_DELAY = 1e18

RECORD_CALLBACK = (
    "INSERT INTO chaos.callbacks (job_id, run_lease, callback_id, action) VALUES (%s, %s, %s, %s)"
)

#: The handlers' own connections are named ``<process name>-side``: faults that cut the
#: sessions of a process cut wai's, not the soak's instrumentation.
APP_NAME = os.environ.get("PGAPPNAME", "chaos")

client = wai.AsyncClient(max_connections=12)


@dataclass
class Plain:
    n: int
    ms: int = 0


@dataclass
class Flow:
    n: int
    mode: str = "ok"
    fails: int = 0
    action: str = ""
    poison: str = ""


@dataclass
class FollowUp:
    """The follow-up of ``Flow`` job ``trigger``'s attempt ``lease``, made on ``outcome``."""

    trigger: int
    lease: int
    outcome: str


@dataclass
class Tick:
    source: str = "cron"


class _Side:
    """The handlers' own pool, opened on first use in the worker's event loop."""

    def __init__(self) -> None:
        self.pool: AsyncConnectionPool[Any] | None = None
        self._lock: asyncio.Lock | None = None

    async def get(self) -> AsyncConnectionPool[Any]:
        if self.pool is None:
            self._lock = self._lock or asyncio.Lock()
            async with self._lock:
                if self.pool is None:
                    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
                        client.database_url,
                        min_size=1,
                        max_size=8,
                        kwargs={"autocommit": True, "application_name": f"{APP_NAME}-side"},
                        open=False,
                    )
                    await pool.open()
                    self.pool = pool
        return self.pool

    async def execute(self, query: Any, params: tuple[Any, ...]) -> None:
        pool = await self.get()
        async with pool.connection() as conn:
            await conn.execute(query, params)


side = _Side()


async def _record_run(job: wai.Job[Any]) -> None:
    await side.execute(RECORD_RUN, (job.id, job.run_lease, os.getpid()))


@client.task(Plain, queue=QUEUE)
async def plain(job: wai.Job[Plain]) -> None:
    await _record_run(job)
    if job.args.ms:
        await asyncio.sleep(job.args.ms / 1000)


@client.task(FollowUp, queue=FOLLOWUP_QUEUE)
async def follow_up(job: wai.Job[FollowUp]) -> None:
    await _record_run(job)


@client.task(Tick, queue=QUEUE)
async def tick(job: wai.Job[Tick]) -> None:
    await _record_run(job)


@client.task(Flow, queue=QUEUE)
async def flow(job: wai.Job[Flow]) -> Any:
    await _record_run(job)
    args = job.args
    if args.poison in ("nul", "surrogate"):
        char = "\x00" if args.poison == "nul" else "\ud800"
        raise ValueError(f"poison {args.poison}: {char} in the message of attempt {job.attempt}")
    if args.poison == "huge_retry":
        return wai.RetryAfter(HUGE_DELAY)
    return await _behave(job)


async def _behave(job: wai.Job[Flow]) -> Any:
    args = job.args
    match args.mode:
        case "retry" if job.attempt <= args.fails:
            raise RuntimeError(f"planned failure {job.attempt} of {args.fails}")
        case "exhaust":
            raise RuntimeError(f"planned failure {job.attempt}, never succeeds")
        case "terminal":
            raise wai.TerminalError("planned terminal failure")
        case "cancel":
            return wai.Cancel("planned cancel")
        case "callback":
            return await _park(job)
        case _:
            return None


async def _park(job: wai.Job[Flow]) -> wai.WaitForCallback:
    action = job.args.action if job.run_lease == 1 else "complete"
    timeout = CALLBACK_TIMEOUT.get(action, DEFAULT_CALLBACK_TIMEOUT)
    token = await job.register_callback(timeout=timeout)
    await side.execute(RECORD_CALLBACK, (job.id, job.run_lease, token.id, action))
    return wai.WaitForCallback(token)


def _followup(args: Flow, job: wai.JobRow, outcome: str) -> FollowUp:
    if args.poison == "closure":
        raise TypeError(f"poison closure of {outcome}")
    return FollowUp(trigger=job.id, lease=job.run_lease, outcome=outcome)


client.on_completed_enqueue(
    Flow, lambda args, job: _followup(args, job, "completed"), name="flow-completed"
)
client.on_completed_enqueue_with(
    Flow,
    lambda args, job: wai.EnqueueRequest(
        _followup(args, job, "completed"), queue=FOLLOWUP_QUEUE, priority=1
    ),
    name="flow-completed-with",
)
client.on_retried_enqueue(
    Flow, lambda args, job, *_: _followup(args, job, "retried"), name="flow-retried"
)
client.on_exhausted_enqueue(
    Flow, lambda args, job, *_: _followup(args, job, "exhausted"), name="flow-exhausted"
)
client.on_cancelled_enqueue(
    Flow, lambda args, job, _reason: _followup(args, job, "cancelled"), name="flow-cancelled"
)
client.on_waiting_for_callback_enqueue(
    Flow,
    lambda args, job: _followup(args, job, "waiting_for_callback"),
    name="flow-waiting",
)
client.on_rescued_enqueue(
    Flow, lambda args, job, _reason: _followup(args, job, "rescued"), name="flow-rescued"
)
client.periodic(SCHEDULE, "* * * * * *", Tick(), missed_fire_policy="catch_up")
