"""The chaos soak's processes: ``wai worker``, ``wai maintenance`` and ``wai callbacks serve``.

Each is a real OS process (``python -m wai ...`` loading ``bench.chaos_app:client``) in
a session of its own, so a Ctrl-C at the terminal reaches only the soak, which then
stops them. Every connection of a process carries ``application_name`` = its name
(``PGAPPNAME``), so a fault can find its sessions; its output goes to
``<logs>/<name>.<n>.log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

APP = "bench.chaos_app:client"

#: Short timings, as the fault tests use; retention far beyond the run (nothing deleted).
TIMINGS = (
    "--heartbeat-interval", "0.5", "--heartbeat-staleness", "2", "--rescue-interval", "0.5",
    "--promote-interval", "0.1", "--election-interval", "0.5", "--record-interval", "1",
    "--cleanup-interval", "86400", "--completed-retention", "8640000",
    "--failed-retention", "8640000", "--cancelled-retention", "8640000",
    "--shutdown-timeout", "5",
)  # fmt: skip
QUEUES = ("-q", "chaos=16", "-q", "chaos-dlq=4", "-q", "chaos-followups=8")


@dataclass
class Member:
    """One role of the fleet and the process currently playing it."""

    name: str
    argv: list[str]
    proc: asyncio.subprocess.Process | None = None
    starts: int = 0
    stopped: bool = False  # SIGSTOPped and not yet continued

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.alive and self.proc else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None


@dataclass
class Fleet:
    """Starts, signals, restarts and finally stops the soak's processes."""

    root: Path
    url: str
    logs: Path
    secret: str
    members: dict[str, Member] = field(default_factory=dict[str, Member])

    def _env(self, name: str) -> dict[str, str]:
        path = os.pathsep.join(
            p for p in (str(self.root / "src"), str(self.root), os.environ.get("PYTHONPATH")) if p
        )
        return {
            **os.environ,
            "WAI_DATABASE_URL": self.url,
            "PGAPPNAME": name,
            "PYTHONPATH": path,
            "PYTHONUNBUFFERED": "1",
            "CHAOS_SECRET": self.secret,
        }

    def add_worker(self, name: str) -> Member:
        return self._add(name, ["worker", APP, *QUEUES, "--poll-interval", "0.2", *TIMINGS])

    def add_maintenance(self, name: str) -> Member:
        return self._add(name, ["maintenance", APP, *TIMINGS])

    def add_ingress(self, name: str, port: int) -> Member:
        argv = ["callbacks", "serve", APP, "--secret-env", "CHAOS_SECRET", "--port", str(port)]
        return self._add(name, argv)

    def _add(self, name: str, argv: list[str]) -> Member:
        member = Member(name, [sys.executable, "-m", "wai", *argv])
        self.members[name] = member
        return member

    def workers(self) -> list[Member]:
        return [m for m in self.members.values() if m.argv[3] == "worker"]

    def by_pid(self, pid: int) -> Member | None:
        return next((m for m in self.members.values() if m.pid == pid), None)

    async def start(self, member: Member) -> None:
        """Start (or restart) ``member``'s process."""
        member.starts += 1
        log = (self.logs / f"{member.name}.{member.starts}.log").open("wb")
        member.proc = await asyncio.create_subprocess_exec(
            *member.argv, cwd=self.root, env=self._env(member.name), stdout=log,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()
        member.stopped = False

    async def start_all(self) -> None:
        for member in self.members.values():
            await self.start(member)

    async def kill(self, member: Member) -> None:
        """SIGKILL: no shutdown, no resignation, no last outcome."""
        if member.alive and member.proc:
            member.proc.kill()
            await member.proc.wait()
        member.stopped = False

    def pause(self, member: Member) -> None:
        if member.alive and member.proc:
            member.proc.send_signal(signal.SIGSTOP)
            member.stopped = True

    def resume(self, member: Member) -> None:
        if member.alive and member.proc:
            member.proc.send_signal(signal.SIGCONT)
        member.stopped = False

    async def stop(self, member: Member, timeout: float = 30) -> int | None:
        """SIGTERM and the exit code; SIGKILL (and None) when it outlives ``timeout``."""
        if not member.alive or not member.proc:
            return member.proc.returncode if member.proc else None
        self.resume(member)
        member.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(asyncio.shield(member.proc.wait()), timeout)
        except TimeoutError:
            await self.kill(member)
            return None

    def dead(self) -> list[Member]:
        """Members whose process exited although nobody stopped it."""
        return [m for m in self.members.values() if m.proc is not None and not m.alive]

    async def close(self) -> None:
        """Kill whatever still runs (continued first, so that SIGKILL is not delayed)."""
        for member in self.members.values():
            if member.alive and member.proc:
                with contextlib.suppress(ProcessLookupError):
                    member.proc.send_signal(signal.SIGCONT)
                    member.proc.kill()
        for member in self.members.values():
            if member.proc is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(member.proc.wait(), 10)

    def kill_all_now(self) -> None:
        """Synchronous (safe in a signal handler): SIGCONT then SIGKILL every process."""
        for member in self.members.values():
            if member.alive and member.proc:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(member.proc.pid, sig)

    def tail(self, member: Member, chars: int = 3000) -> str:
        path = self.logs / f"{member.name}.{member.starts}.log"
        with contextlib.suppress(OSError):
            return path.read_text(errors="replace")[-chars:]
        return ""
