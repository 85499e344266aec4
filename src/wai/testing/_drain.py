"""drain: the client's real worker runtime, with test timings, until its queues are empty."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from wai._context import AttemptState
from wai._followups import Applied
from wai._job import JobRow, JobState
from wai._kinds import kind_of_type
from wai._outcomes import Outcome
from wai._queues import normalize_queues
from wai.errors import ValidationError, WaiError
from wai.testing import _queries as testing_db
from wai.testing._run import final_row, followups_of
from wai.worker import Runtime, RuntimeSettings

if TYPE_CHECKING:
    from wai._client_base_async import AsyncClientBase

__all__ = ["DrainReport", "DrainTimeout", "DrainedJob", "drain"]

#: Timings that make a runtime react within a few tens of milliseconds: a due retry is
#: promoted, an idle queue polled, a leader elected, an outbox row dispatched.
TEST_SETTINGS = RuntimeSettings(
    poll_interval=0.05,
    promote_interval=0.05,
    election_interval=0.1,
    outbox_interval=0.1,
    cron_interval=0.1,
)
#: How often drain looks for jobs left to run.
_CHECK = 0.05
#: How many of the jobs left a timeout lists.
_LISTED = 20


class DrainTimeout(WaiError, TimeoutError):
    """:func:`drain` ran out of time with jobs still to run; ``left`` lists some of them.

    ``report`` holds the jobs that did finish an attempt before the timeout.
    """

    def __init__(self, message: str, *, left: Sequence[testing_db.Left], report: DrainReport):
        super().__init__(message)
        self.left = list(left)
        self.report = report


@dataclass(frozen=True, slots=True, kw_only=True)
class DrainedJob:
    """One job a drain ran, as it ended.

    ``state`` and ``attempts`` are read after the drain (``attempts`` is the job's
    attempt count); ``events`` are the outcomes its attempts committed during the
    drain, in order (``"retried"``, ``"completed"`` ...); ``followups`` the jobs those
    outcomes enqueued, oldest first. ``dead_lettered``: the job's row is in the
    dead-letter queue, ``job`` is the row it holds there.
    """

    id: int
    kind: str
    queue: str
    state: JobState
    attempts: int
    events: list[str]
    followups: list[JobRow]
    job: JobRow
    dead_lettered: bool = False


@dataclass(frozen=True, slots=True)
class DrainReport:
    """The jobs a :func:`drain` ran, in the order their last outcome committed."""

    jobs: list[DrainedJob] = field(default_factory=list[DrainedJob])

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[DrainedJob]:
        return iter(self.jobs)

    def of_kind(self, kind: str | type) -> list[DrainedJob]:
        """The drained jobs of ``kind`` (a kind name or an args type)."""
        name = kind_of_type(kind)
        return [j for j in self.jobs if j.kind == name]

    def get(self, job_id: int) -> DrainedJob:
        """The drained job ``job_id``; :class:`KeyError` if the drain did not run it."""
        for job in self.jobs:
            if job.id == job_id:
                return job
        raise KeyError(f"job {job_id} did not run during this drain")

    @property
    def kinds(self) -> list[str]:
        """The kinds of the drained jobs, in order."""
        return [j.kind for j in self.jobs]


class _RecordingRuntime(Runtime):
    """The worker runtime, noting each committed outcome in commit order."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.outcomes: list[Outcome] = []

    def _committed(self, batch: Sequence[tuple[Outcome, AttemptState]], applied: Applied) -> None:
        super()._committed(batch, applied)
        self.outcomes.extend(o for o, _ in batch if o.job_id in applied.written)


async def drain(
    client: AsyncClientBase,
    queues: Iterable[str] | None = None,
    *,
    timeout: float = 30.0,
    concurrency: int = 10,
) -> DrainReport:
    """Run workers on ``queues`` until no job there is left to run; what each job did.

    The client's real worker runtime serves the queues (every queue of its registry
    by default), with ``concurrency`` slots each and timings for tests (polls and
    promotion every 50 ms), maintenance included: a retry or snooze that falls due
    is promoted and run again, follow-ups are claimed as they commit. It stops once
    none of those queues holds a job that is available, running, or scheduled or
    retryable and due; a job retried for later, scheduled for later or waiting for a
    callback is left. Then the runtime shuts down.

    After ``timeout`` seconds :class:`DrainTimeout` lists the jobs still to run.
    """
    names = list(dict.fromkeys(queues)) if queues is not None else client.registry.queues()
    if not names:
        raise ValidationError("drain: no queues (register a task, or pass queues)")
    configs = normalize_queues(dict.fromkeys(names, concurrency), names)
    await client.open()
    runtime = _RecordingRuntime(client, configs, TEST_SETTINGS)
    began = time.monotonic()
    left: list[testing_db.Left] = []
    await runtime.start()
    try:
        while True:
            async with client.pool.connection() as conn:
                left = await testing_db.job_left_in_queues(
                    conn, client.schema, names, limit=_LISTED + 1
                )
            if not left:
                break
            if time.monotonic() - began >= timeout:
                break
            await asyncio.sleep(_CHECK)
    finally:
        await runtime.shutdown(timeout=5.0)
    report = await _report(client, runtime.outcomes)
    if left:
        listed = "\n".join(
            f"  job {j.id} {j.kind!r} in queue {j.queue!r}: {j.state}, "
            f"run_at {j.run_at.isoformat()}"
            for j in left[:_LISTED]
        )
        more = " (and more)" if len(left) > _LISTED else ""
        raise DrainTimeout(
            f"drain of queues {names} timed out after {timeout:g}s with jobs left to run"
            f"{more}; {len(report)} jobs finished an attempt meanwhile. Left:\n{listed}",
            left=left[:_LISTED],
            report=report,
        )
    return report


async def _report(client: AsyncClientBase, outcomes: Sequence[Outcome]) -> DrainReport:
    events: dict[int, list[str]] = {}
    leases: dict[int, set[int]] = {}
    for outcome in outcomes:
        # re-inserted at the end: the order is that of each job's last outcome
        seen = events.pop(outcome.job_id, [])
        seen.append(outcome.event)
        events[outcome.job_id] = seen
        leases.setdefault(outcome.job_id, set()).add(outcome.run_lease)
    jobs: list[DrainedJob] = []
    for job_id, job_events in events.items():
        row, dead = await final_row(client, job_id)
        followups = [
            f
            for f in await followups_of(client, job_id)
            if f.trigger is not None and f.trigger.run_lease in leases[job_id]
        ]
        jobs.append(
            DrainedJob(
                id=row.id,
                kind=row.kind,
                queue=row.queue,
                state=row.state,
                attempts=row.attempt,
                events=job_events,
                followups=followups,
                job=row,
                dead_lettered=dead,
            )
        )
    return DrainReport(jobs)
