"""The adapter interface: what the harness needs from one job-queue library.

An adapter has two halves that may live in different Python environments:

* **Static metadata** (class attributes and ``*_sql`` methods), read by the
  orchestrator ``run.py`` in whatever environment runs it. Importing an adapter
  module must therefore not import its library: import it inside ``setup``.
* **Producer methods** (``setup``, ``insert_single``, ``insert_batch``,
  ``insert_timed``, ``close``, and optionally ``prepare_concurrent`` and
  ``insert_concurrent``), called inside ``producer.py``, a child process
  started with the adapter's own interpreter (its virtualenv).

The worker is a separate script (``worker_module``), also started with the
adapter's interpreter, that speaks the line protocol described in
``protocol.py``.

To add a peer library: write ``adapter_<name>.py`` with a subclass of
:class:`Adapter` and ``worker_<name>.py``, then add it to :data:`ADAPTERS`. Its
interpreter is found, in this order, from ``--python name=/path``,
``BENCH_PYTHON_<NAME>=/path/to/python`` and ``bench/.venvs/<name>/bin/python``
(created by ``bench/setup_peers.sh``); wai itself falls back to the running
interpreter.
"""

from __future__ import annotations

import importlib
import os
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

__all__ = ["ADAPTERS", "BENCH_DIR", "VENVS_DIR", "Adapter", "load_adapter"]

BENCH_DIR = Path(__file__).resolve().parent
#: Where ``setup_peers.sh`` creates one virtualenv per peer library.
VENVS_DIR = BENCH_DIR / ".venvs"

#: Adapter name -> "module:Class", the module being a file in bench/.
ADAPTERS: dict[str, str] = {
    "wai": "adapter_wai:WaiAdapter",
    "awa": "adapter_awa:AwaAdapter",
    "pgqueuer": "adapter_pgqueuer:PgqueuerAdapter",
    "procrastinate": "adapter_procrastinate:ProcrastinateAdapter",
}

#: The queue every workload uses.
QUEUE = "bench"


class Adapter(ABC):
    """One library under test. Subclass it once per library."""

    #: Short name, used on the command line and in results.
    name: ClassVar[str]
    #: The worker script in bench/ (run as ``python bench/<worker_module>.py``).
    worker_module: ClassVar[str]
    #: The PyPI distribution whose version is reported.
    distribution: ClassVar[str]
    #: Driver distributions whose versions are reported next to the library's.
    drivers: ClassVar[tuple[str, ...]] = ("psycopg",)
    #: True if the library lives in its own virtualenv (``bench/.venvs/<name>``).
    own_venv: ClassVar[bool] = False
    #: True if the worker takes ``--followups`` (the follow-up drain workload).
    supports_followups: ClassVar[bool] = False
    #: True if the worker takes ``--cpu-ms`` and ``--sync-handler`` (the ``cpu2`` workload).
    supports_cpu_handler: ClassVar[bool] = False
    #: Why the ``concurrent`` workload (many producer tasks in one process) does not apply
    #: to this library, or None if :meth:`prepare_concurrent` and
    #: :meth:`insert_concurrent` are implemented.
    concurrent_skip: ClassVar[str | None] = "no concurrent producer is written for this adapter"
    #: True if :meth:`prepare_concurrent` takes ``group_commit=True`` (the
    #: ``concurrent`` workload then also runs with it).
    supports_group_commit: ClassVar[bool] = False
    #: Why the ``drain1m`` workload (a drain over stored terminal rows) does not apply to
    #: this library, or None if :meth:`fill_terminal_sql` is implemented.
    terminal_fill_skip: ClassVar[str | None] = "no terminal-row fill is written for this adapter"

    # -- orchestrator side: plain SQL, no library import ------------------------------

    @abstractmethod
    def count_completed_sql(self) -> str:
        """A query polled during drains: one row, first column the jobs completed so far.

        An optional second column counts jobs claimed but not yet recorded as
        completed (in flight); the harness reports its peak, for diagnosis.
        """

    @abstractmethod
    def state_counts_sql(self) -> str:
        """A query returning ``(state text, count bigint)`` rows, for verification."""

    def completed_state(self) -> str:
        """The state name that ``state_counts_sql`` uses for completed jobs."""
        return "completed"

    def pending_state(self) -> str:
        """The state name that ``state_counts_sql`` uses for freshly inserted jobs."""
        return "available"

    def table_filter_sql(self) -> str:
        """A predicate on ``schemaname``/``relname`` that selects the library's tables.

        Used on ``pg_stat_user_tables`` and ``pg_stat_user_indexes`` for the table, index
        and dead-tuple figures of ``soak`` and ``drain1m``.
        """
        raise NotImplementedError(f"{self.name}: no table filter")

    # -- the sustained run (sustained.py) ---------------------------------------------

    def queue_tables(self) -> tuple[str, ...]:
        """The tables every job passes through, as ``schema.table``, the busiest first.

        ``sustained.py`` holds its snapshot by reading one row of the first, and marks
        the autovacuum runs of all of them.
        """
        raise NotImplementedError(f"{self.name}: no queue tables")

    # -- the drain over stored terminal rows (drain1m) --------------------------------

    def fill_terminal_sql(self, n: int) -> list[str]:
        """Statements that store ``n`` finished jobs, as a long-running deployment keeps them.

        Run by the orchestrator, in order and each in its own transaction, on a schema
        the producer has installed, before the prefill. The rows must stay through
        the run (no retention cleanup of the worker may delete them) and must not
        disturb the drain's completed count (see :meth:`count_completed_after_sql`).
        Only called when :attr:`terminal_fill_skip` is None.
        """
        raise NotImplementedError(self.terminal_fill_skip or self.name)

    def fill_watermark_sql(self) -> str:
        """One value, run right after the fill: the largest id the fill produced.

        Everything the completed count of :meth:`count_completed_after_sql` reads and
        the drain adds gets a larger id.
        """
        raise NotImplementedError(self.terminal_fill_skip or self.name)

    def count_completed_after_sql(self, after: int) -> str:
        """Like :meth:`count_completed_sql`, but only rows with an id above ``after``.

        Polled during ``drain1m`` instead of the full count, which would scan the
        stored terminal rows at every poll; it must be cheap (an index range scan).
        """
        raise NotImplementedError(self.terminal_fill_skip or self.name)

    def python(self, overrides: dict[str, str] | None = None) -> str:
        """The interpreter of this adapter's environment.

        ``overrides`` (``--python``), then ``BENCH_PYTHON_<NAME>``, then
        ``bench/.venvs/<name>/bin/python``; an adapter without ``own_venv`` falls
        back to the running interpreter, the others raise ``FileNotFoundError``.
        """
        if overrides and self.name in overrides:
            return overrides[self.name]
        env = os.environ.get(f"BENCH_PYTHON_{self.name.upper()}")
        if env:
            return env
        venv_python = VENVS_DIR / self.name / "bin" / "python"
        if venv_python.exists():
            return str(venv_python)
        if self.own_venv:
            raise FileNotFoundError(
                f"no interpreter for adapter {self.name!r}: run bench/setup_peers.sh "
                f"(creates {venv_python}), or pass --python {self.name}=PATH"
            )
        return sys.executable

    # -- producer side: runs in producer.py, in the adapter's environment ------------

    @abstractmethod
    async def setup(self, database_url: str) -> None:
        """Connect and install the library's schema (before any clock starts)."""

    @abstractmethod
    async def insert_single(self, start: int, count: int) -> None:
        """Insert jobs ``seq = start .. start+count-1`` one per awaited call and transaction."""

    @abstractmethod
    async def insert_batch(self, start: int, count: int, chunk: int) -> None:
        """Insert the same jobs through the batch API, ``chunk`` jobs per call."""

    @abstractmethod
    async def insert_timed(self, seq: int) -> None:
        """Insert one job whose args carry ``seq`` and ``t = time.time()`` taken just now."""

    async def insert_timed_many(self, seqs: range, chain_every: int) -> None:
        """Insert the jobs ``seqs`` in one call, each as :meth:`insert_timed` (every
        ``chain_every``-th as :meth:`insert_chained`), ``t`` taken once just now. By
        default one call per job; adapters override it with their batch insert."""
        for seq in seqs:
            if chain_every and seq % chain_every == 0:
                await self.insert_chained(seq)
            else:
                await self.insert_timed(seq)

    async def insert_chained(self, seq: int) -> None:
        """Like :meth:`insert_timed`, for a job that enqueues one follow-up job when it
        completes (the worker registers the follow-up; adapters with ``supports_followups``).
        """
        raise NotImplementedError(f"{self.name}: no follow-up jobs")

    async def prepare_concurrent(self, producers: int, group_commit: bool) -> None:
        """Before the clock: what :meth:`insert_concurrent` inserts through, connected.

        ``producers`` tasks will share it; ``group_commit`` only where
        :attr:`supports_group_commit`. Only called when :attr:`concurrent_skip` is None.
        """
        raise NotImplementedError(self.concurrent_skip or self.name)

    async def insert_concurrent(self, start: int, count: int, producers: int) -> None:
        """Insert jobs ``seq = start .. start+count-1`` from ``producers`` asyncio tasks at once.

        Task ``k`` inserts ``start+k``, ``start+k+producers``, ... one awaited single insert
        at a time, as request handlers of a web application each enqueue their job.
        """
        raise NotImplementedError(self.concurrent_skip or self.name)

    @abstractmethod
    async def ping(self) -> None:
        """Run one trivial statement on each idle connection the producer holds.

        PostgreSQL 15 defers a busy backend's statistics for up to 10 s once it
        idles; a new transaction after more than 1 s flushes them, so the harness
        calls this before taking its "before" snapshot.
        """

    @abstractmethod
    async def close(self) -> None:
        """Release connections."""

    def origin(self) -> str | None:
        """Where the library was imported from (call in the adapter's environment)."""
        return None

    def version(self) -> str:
        """The installed version of the library (call in the adapter's environment)."""
        from importlib.metadata import version

        return version(self.distribution)


def load_adapter(name: str) -> Adapter:
    """Instantiate the adapter registered as ``name``."""
    try:
        target = ADAPTERS[name]
    except KeyError:
        raise SystemExit(f"unknown adapter {name!r}; known: {', '.join(ADAPTERS)}") from None
    module_name, _, cls_name = target.partition(":")
    if str(BENCH_DIR) not in sys.path:
        sys.path.insert(0, str(BENCH_DIR))
    module = importlib.import_module(module_name)
    cls = getattr(module, cls_name)
    return cls()
