"""What ``client.health()`` reports, and the decision it makes from what it saw (pure).

The client observes the facts (:class:`DatabaseCheck`, the runtime's
:class:`RuntimeHealth`); :func:`assess` decides from them alone whether the process is
*ready* (it can take work now) and *live* (it can do its work at all, so restarting it
is not the cure), and says in one sentence per problem what is wrong. :class:`LoopLag`
keeps the event loop's recent lateness for the runtime's lag monitor.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from wai.errors import ValidationError

__all__ = [
    "LAG_TICK",
    "LAG_WINDOW",
    "LOOP_LAG_LIMIT",
    "DatabaseCheck",
    "Health",
    "LoopLag",
    "RuntimeHealth",
    "assess",
    "check_timeout",
    "first_line",
]

#: Seconds between two ticks of the runtime's event-loop lag monitor.
LAG_TICK: Final = 0.5
#: Seconds of ticks :attr:`RuntimeHealth.loop_lag` looks back over.
LAG_WINDOW: Final = 10.0
#: An event loop later than this (seconds) is not live: heartbeats, claims and outcome
#: writes all wait on it.
LOOP_LAG_LIMIT: Final = 5.0


@dataclass(frozen=True, slots=True)
class RuntimeHealth:
    """The worker runtime of a client, as :meth:`wai.AsyncClient.health` saw it.

    *instance_id*: the runtime's id, as in ``runtime_instances`` and the logs.
    *running*: started, and no shutdown begun. *stopping*: a shutdown has begun
    (:meth:`wai.AsyncClient.shutdown`, a signal, or burst mode running out of work).
    *claimers*: each served queue, and whether its claim loop runs (in burst mode, a
    loop that ended because its queue ran empty counts as running). *leader*: this
    process holds the maintenance leadership. *in_flight*: attempts running, or
    finished and waiting for their outcome to be written. *background*: each
    background loop of the runtime (``hooks``, ``finalizer``, ``heartbeat``,
    ``notifier``, ``records``, ``throughput``, ``outbox``, ``elector``, ``loop_lag``;
    those the process needs) and whether it runs. *listening*: the LISTEN connection
    is up (when it is down, queues are claimed by polling); None for a runtime that
    serves no queue. *loop_lag*: the most seconds the event loop ran a periodic tick
    late over the last ten seconds, a tick overdue now included.
    """

    instance_id: str
    running: bool
    stopping: bool
    claimers: Mapping[str, bool]
    leader: bool
    in_flight: int
    background: Mapping[str, bool]
    listening: bool | None
    loop_lag: float


@dataclass(frozen=True, slots=True)
class Health:
    """The facts a liveness or readiness probe needs, from :meth:`wai.AsyncClient.health`.

    *ready*: the process can take work now: the database answered, the schema has
    every migration, and (when the client runs workers) the runtime runs with every
    claim loop and background loop alive. *live*: the process can do its work at all;
    False only when its worker runtime has a loop that ended while no shutdown was
    asked for (nothing in the process restarts it), or its event loop lags more than
    five seconds: restarting the process is the cure. A database outage leaves it
    True. *database*: a connection answered a query within the timeout.
    *schema_current*: every migration this version of wai ships is applied (False
    too when the database did not answer). *pending_migrations*: the versions not
    applied yet (empty when they could not be read). *runtime*: the worker runtime
    (:class:`wai.RuntimeHealth`); None when none runs in this client (a
    :class:`wai.Client`, an :class:`wai.AsyncClient` not started or shut down).
    *problems*: one sentence per thing that is wrong, empty exactly when *ready* and
    *live* are both True. *checked_at*: when the check began (UTC). *latency*:
    seconds the database check took, whether it succeeded or not (a connection, two
    short queries; the timeout when the database did not answer in time).
    """

    ready: bool
    live: bool
    database: bool
    schema_current: bool
    pending_migrations: tuple[int, ...]
    runtime: RuntimeHealth | None
    problems: tuple[str, ...]
    checked_at: datetime
    latency: float


@dataclass(frozen=True, slots=True)
class DatabaseCheck:
    """What the database check of ``client.health()`` saw.

    *answered*: a connection answered. *applied*: the migration versions in the
    schema's ledger (empty for a schema never migrated); None when they could not be
    read. *error*: why not, one line, when the check failed. *latency*: seconds the
    check took.
    """

    answered: bool
    applied: frozenset[int] | None
    error: str | None
    latency: float


def check_timeout(timeout: float) -> float:
    """``timeout`` as seconds a health check may take: a finite number > 0."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ValidationError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
    return float(timeout)


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (psycopg adds hints below it), else its type."""
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()
    return type(exc).__name__


def assess(
    database: DatabaseCheck,
    *,
    schema: str,
    migrations: Sequence[int],
    runtime: RuntimeHealth | None,
    checked_at: datetime,
    max_loop_lag: float = LOOP_LAG_LIMIT,
) -> Health:
    """Decide readiness and liveness from what the client saw.

    ``migrations`` are the versions this wai ships; ``runtime`` is None when the
    client runs no worker runtime.
    """
    problems: list[str] = []
    pending: tuple[int, ...] = ()
    if not database.answered:
        problems.append(f"database unreachable: {database.error or 'no answer'}")
    elif database.applied is None:
        problems.append(
            f"cannot read the migrations of schema {schema!r}: {database.error or 'unknown'}"
        )
    else:
        pending = tuple(v for v in migrations if v not in database.applied)
        if pending:
            problems.append(f"schema {schema!r} lacks migrations {list(pending)}")
    schema_current = database.answered and database.applied is not None and not pending
    live = True
    ready = schema_current
    if runtime is not None:
        if runtime.stopping:
            ready = False
            problems.append("worker runtime is shutting down")
        elif not runtime.running:
            ready = False
            problems.append("worker runtime is starting")
        else:
            dead = [f"queue {q!r} claimer stopped" for q, up in runtime.claimers.items() if not up]
            dead += [
                f"background loop {name!r} stopped"
                for name, up in runtime.background.items()
                if not up
            ]
            if dead:
                ready = live = False
                problems.extend(dead)
        if runtime.loop_lag > max_loop_lag:
            ready = live = False
            problems.append(
                f"event loop lagging: a tick ran {runtime.loop_lag:.1f} s late "
                f"(limit {max_loop_lag:g} s)"
            )
    return Health(
        ready=ready,
        live=live,
        database=database.answered,
        schema_current=schema_current,
        pending_migrations=pending,
        runtime=runtime,
        problems=tuple(problems),
        checked_at=checked_at,
        latency=database.latency,
    )


class LoopLag:
    """How late an event loop ran its ticks over the last ``window`` seconds.

    The runtime's monitor calls :meth:`expect` with the time it means to wake at, sleeps,
    then calls :meth:`ticked`; :meth:`worst` is the largest lateness seen within the
    window, or the lateness of the tick overdue now if larger (a loop blocked at this
    very moment). Times are ``time.monotonic()`` seconds, passed in.
    """

    def __init__(self, window: float = LAG_WINDOW) -> None:
        self._window = window
        self._due: float | None = None
        self._late: deque[tuple[float, float]] = deque()  # (when it ran, seconds late)

    def expect(self, due: float) -> None:
        """The next tick should run at ``due``."""
        self._due = due

    def ticked(self, now: float) -> None:
        """The expected tick ran at ``now``."""
        if self._due is not None:
            self._late.append((now, max(0.0, now - self._due)))
            self._due = None
        while self._late and now - self._late[0][0] > self._window:
            self._late.popleft()

    def worst(self, now: float) -> float:
        """The most seconds a tick ran late within the window before ``now``."""
        overdue = max(0.0, now - self._due) if self._due is not None else 0.0
        return max([overdue, *(late for at, late in self._late if now - at <= self._window)])
