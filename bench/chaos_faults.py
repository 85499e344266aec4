"""The chaos soak's faults, injected round-robin with seeded jitter.

Every round shuffles :data:`KINDS` (seeded), so each kind fires once per round; each
fault starts ``interval`` times a factor in [0.6, 1.4) after the previous one started
(at least a second after it ended). A killed process is
restarted after a second or two; a stopped one is continued after
``STOP_SECONDS`` (longer than the heartbeat staleness, 2 s).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from chaos_fleet import Fleet, Member
from tests.faults._cluster import PgCluster
from tests.faults._contract import Db

KINDS = (
    "kill_worker",
    "kill_leader",
    "terminate_sessions",
    "pg_restart_fast",
    "pg_restart_immediate",
    "stop_worker",
)
STOP_SECONDS = 3.5

TERMINATE: Any = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = ANY (%s) AND pid <> pg_backend_pid()
"""


@dataclass
class Injector:
    """Injects faults into ``fleet`` and ``cluster`` until :meth:`run`'s ``until`` passes."""

    fleet: Fleet
    cluster: PgCluster
    db: Db
    rng: random.Random
    interval: float
    log: Callable[[str], None]
    counts: Counter[str] = field(default_factory=Counter[str])
    history: list[tuple[float, str]] = field(default_factory=list[tuple[float, str]])
    #: Members this injector killed and has not restarted yet.
    holding: set[str] = field(default_factory=set[str])

    async def run(self, until: float) -> None:
        """Inject faults until the loop clock reaches ``until``.

        Gaps count from one fault's start to the next one's, so the time a fault takes
        (a restart, a stop) does not thin the schedule out.
        """
        loop = asyncio.get_running_loop()
        at = loop.time()
        while True:
            kinds = list(KINDS)
            self.rng.shuffle(kinds)
            for kind in kinds:
                at = max(at + self.interval * self.rng.uniform(0.6, 1.4), loop.time() + 1.0)
                if at >= until:
                    return
                await asyncio.sleep(at - loop.time())
                await self.inject(kind)

    async def inject(self, kind: str) -> None:
        actions: dict[str, Callable[[], Awaitable[str]]] = {
            "kill_worker": self._kill_worker,
            "kill_leader": self._kill_leader,
            "terminate_sessions": self._terminate_sessions,
            "pg_restart_fast": lambda: self._restart("fast"),
            "pg_restart_immediate": lambda: self._restart("immediate"),
            "stop_worker": self._stop_worker,
        }
        detail = await actions[kind]()
        self.counts[kind] += 1
        self.history.append((asyncio.get_running_loop().time(), kind))
        self.log(f"fault {kind}: {detail}")

    def _live_worker(self) -> Member:
        live = [m for m in self.fleet.workers() if m.alive and not m.stopped]
        return self.rng.choice(live or self.fleet.workers())

    async def _kill_and_restart(self, member: Member) -> None:
        self.holding.add(member.name)
        try:
            await self.fleet.kill(member)
            await asyncio.sleep(self.rng.uniform(1.0, 2.0))
            await self.fleet.start(member)
        finally:
            self.holding.discard(member.name)

    async def _kill_worker(self) -> str:
        member = self._live_worker()
        await self._kill_and_restart(member)
        return f"SIGKILL {member.name}, restarted"

    async def _kill_leader(self) -> str:
        found = await self.db.leader()
        member = self.fleet.by_pid(found[0]) if found else None
        if member is None:  # no leader right now (an election under way): take a worker
            member = self._live_worker()
            await self._kill_and_restart(member)
            return f"no live leader; SIGKILL {member.name} instead, restarted"
        await self._kill_and_restart(member)
        return f"SIGKILL leader {member.name} ({found[1] if found else '?'}), restarted"

    async def _terminate_sessions(self) -> str:
        names = [m.name for m in self.fleet.workers()]
        n = await self.db.value(TERMINATE, (names,))
        return f"pg_terminate_backend of {n} worker sessions"

    async def _restart(self, mode: str) -> str:
        await asyncio.to_thread(self.cluster.restart, mode)
        return f"pg_ctl restart -m {mode}"

    async def _stop_worker(self) -> str:
        member = self._live_worker()
        self.fleet.pause(member)
        await asyncio.sleep(STOP_SECONDS)
        self.fleet.resume(member)
        return f"SIGSTOP {member.name} for {STOP_SECONDS} s, then SIGCONT"
