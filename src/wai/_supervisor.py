"""Runs N worker processes under one parent: ``wai worker APP --processes N``.

One Python process runs its event loop and its handlers under one GIL, so it
uses about one core. The supervisor starts N copies of the worker command,
restarts any that dies, and stops them all together.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Mapping, Sequence

from wai._logging import say

__all__ = ["SLOT_ENV", "USAGE_ERROR", "Supervisor", "describe_exit"]

#: The environment variable that tells each child its slot, 0 .. N-1 (a restarted child
#: keeps its slot): ``wai worker --metrics-port P`` serves on P + slot.
SLOT_ENV = "WAI_WORKER_SLOT"

#: A child exiting with this status was started wrong (bad options or APP): restarting
#: cannot help, so the supervisor stops every child and exits with it too.
USAGE_ERROR = 2


def _stderr(message: str) -> None:
    say(message)  # a JSON record under --log-format json, like the children's lines


def describe_exit(returncode: int) -> str:
    """``"exited with status 1"`` or ``"was killed by SIGKILL"``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


class Supervisor:
    """Keeps ``processes`` copies of ``command`` running until SIGTERM/SIGINT.

    - A child that exits non-zero or is killed by a signal is restarted after a
      backoff: *backoff* seconds, doubling up to *max_backoff*, back to
      *backoff* once a child has run for *stable_after* seconds. Each exit and
      restart is logged on stderr.
    - A child that exits 0 (``--burst`` found its queues empty) is not
      restarted. A child that exits with status 2 (a usage error) makes the
      supervisor stop every child and exit 2.
    - SIGTERM or SIGINT to the supervisor is forwarded to every child as
      SIGTERM, which starts their graceful shutdown (each child ignores a
      repeated SIGTERM meanwhile, so a service manager that signals the whole
      group does no harm); :meth:`run` returns once every child has exited.

    Children inherit the supervisor's process group, stdout and stderr, and its
    environment plus :data:`SLOT_ENV`.
    """

    def __init__(
        self,
        command: Sequence[str],
        processes: int,
        *,
        env: Mapping[str, str] | None = None,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        stable_after: float = 30.0,
        log: Callable[[str], None] = _stderr,
    ) -> None:
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        self.command = list(command)
        self.processes = processes
        self.env = dict(env) if env is not None else None
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.stable_after = stable_after
        self.log = log
        #: the live child of each slot (tests read the pids)
        self.children: dict[int, asyncio.subprocess.Process] = {}
        self._stop: asyncio.Event | None = None

    def stop(self) -> None:
        """Begin a graceful stop: SIGTERM to every child, restart none."""
        assert self._stop is not None, "stop() called before run()"
        self._stop.set()
        for proc in self.children.values():
            _signal(proc, signal.SIGTERM)

    async def run(self) -> int:
        """Run the children until stopped; returns the exit status for the supervisor.

        0 when every child finally exited 0 (a graceful stop, or burst mode done),
        2 when a child reported a usage error, else 1.
        """
        loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        installed: list[signal.Signals] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass  # not the main thread: the caller stops us with stop()
        try:
            results = await asyncio.gather(*(self._slot(i) for i in range(self.processes)))
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
        if USAGE_ERROR in results:
            return USAGE_ERROR
        return 0 if all(rc == 0 for rc in results) else 1

    def _on_signal(self, sig: signal.Signals) -> None:
        if self._stop is not None and not self._stop.is_set():
            self.log(f"{sig.name} received: stopping {len(self.children)} worker process(es)")
        self.stop()

    async def _slot(self, slot: int) -> int:
        assert self._stop is not None
        loop = asyncio.get_running_loop()
        delay = self.backoff
        label = f"worker process {slot + 1}/{self.processes}"
        while not self._stop.is_set():
            started = loop.time()
            env = {**(self.env if self.env is not None else os.environ), SLOT_ENV: str(slot)}
            proc = await asyncio.create_subprocess_exec(*self.command, env=env)
            self.children[slot] = proc
            if self._stop.is_set():  # a signal arrived while the child was starting
                _signal(proc, signal.SIGTERM)
            self.log(f"{label} started (pid {proc.pid})")
            returncode = await proc.wait()
            del self.children[slot]
            if self._stop.is_set():
                if returncode != 0:
                    self.log(f"{label} (pid {proc.pid}) {describe_exit(returncode)} while stopping")
                return returncode
            if returncode == 0:
                self.log(f"{label} (pid {proc.pid}) finished")
                return 0
            if returncode == USAGE_ERROR:
                self.log(f"{label} (pid {proc.pid}) reported a usage error: stopping all")
                self.stop()
                return USAGE_ERROR
            if loop.time() - started >= self.stable_after:
                delay = self.backoff
            self.log(
                f"{label} (pid {proc.pid}) {describe_exit(returncode)}; restarting in {delay:g} s"
            )
            with contextlib.suppress(TimeoutError):  # the backoff, cut short by a stop
                await asyncio.wait_for(self._stop.wait(), delay)
            delay = min(delay * 2, self.max_backoff)
        return 0


def _signal(proc: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):  # exited between check and signal
            proc.send_signal(sig)
