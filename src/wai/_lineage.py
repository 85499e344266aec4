"""A job's lineage: the follow-up chain it belongs to, both ways (pure, no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from wai._job import JobRow
from wai.outbox import OutboxEntry

__all__ = ["Lineage"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Lineage:
    """A job with its trigger chain up and its follow-ups down (:meth:`AsyncClient.lineage`).

    ``ancestors`` is the trigger chain, nearest trigger first: ``ancestors[0]`` enqueued
    ``job`` as a follow-up, ``ancestors[1]`` enqueued ``ancestors[0]``, and so on. It
    ends at a job that no follow-up spec enqueued, or at a trigger already deleted by
    retention (``job.trigger`` still names it). ``followups`` are the jobs ``job``'s
    outcomes enqueued and theirs, breadth first (by id within a level); each names its parent in
    ``row.trigger``, and :meth:`children` walks them as a tree. ``owed`` are the outbox
    rows of ``job`` and its follow-ups: transitions whose follow-ups are not enqueued
    yet, with their last error. ``truncated`` says the follow-ups were more than the
    call's limit: the deepest are left out.
    """

    job: JobRow
    ancestors: tuple[JobRow, ...]
    followups: tuple[JobRow, ...]
    owed: tuple[OutboxEntry, ...]
    truncated: bool

    def children(self, job_id: int) -> list[JobRow]:
        """The follow-ups that job ``job_id`` (``job`` or one of ``followups``) enqueued."""
        return [r for r in self.followups if r.trigger is not None and r.trigger.job_id == job_id]

    @property
    def root(self) -> JobRow:
        """The first job of the chain that is still stored: the last ancestor, or ``job``."""
        return self.ancestors[-1] if self.ancestors else self.job


def assemble(
    job: JobRow,
    ancestors: Sequence[JobRow],
    followups: Sequence[JobRow],
    owed: Sequence[OutboxEntry],
    *,
    limit: int,
) -> Lineage:
    """The :class:`Lineage` of ``job`` from what the queries returned (at most ``limit`` + 1
    follow-ups were asked for: one more than ``limit`` means there are more)."""
    kept = followups[:limit]
    # The walk returns a level before the next, in no order within a level: order each
    # level by id, so that the same lineage always reads the same.
    level = {job.id: 0}
    for row in kept:  # a parent always comes before its follow-ups
        assert row.trigger is not None  # the walk follows trigger_job_id
        level[row.id] = level[row.trigger.job_id] + 1
    return Lineage(
        job=job,
        ancestors=tuple(ancestors),
        followups=tuple(sorted(kept, key=lambda r: (level[r.id], r.id))),
        owed=tuple(owed),
        truncated=len(followups) > limit,
    )
