"""Worker outcomes: the finalizer's batches of guarded updates with their follow-ups.

Async only: only the worker finalizes attempts. One transaction holds the guarded updates
of a batch, the follow-up jobs of the rows they changed (or the outbox rows owing them) and
the dead-letter rows of the jobs that failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import AsyncConnection

from wai import _inserts_db_async as inserts_db
from wai._followups import Applied, error_text, plan_row
from wai._inserts import NewJob
from wai._job import JobRow, JobState
from wai._outcomes import Outcome
from wai._registry import Registry
from wai.dlq import _queries_async as dlq_db
from wai.dlq import failure_reason
from wai.errors import FollowUpError
from wai.transitions import _queries as db
from wai.transitions._apply_async import leave_outbox_rows, outcome_detail

__all__ = ["Planned", "apply_outcomes"]


class _Rejected(Exception):
    """Rolls a batch back because some of its jobs' follow-up specs failed."""

    def __init__(self, failed: dict[int, FollowUpError]) -> None:
        super().__init__(f"{len(failed)} follow-up failures")
        self.failed = failed


@dataclass(frozen=True, slots=True)
class Planned:
    """The follow-ups of one outcome, evaluated before the write took any lock.

    ``expected`` is the row the closures were handed, the one the write should commit:
    when the committed row differs, the follow-ups are planned again from it.
    ``outbox`` marks an outcome recording a failed follow-up whose own specs failed as
    well: its specs are left to the outbox instead, in the same transaction.
    """

    expected: JobRow | None = None
    jobs: Sequence[NewJob] = ()
    outbox: bool = False


_NOTHING_PLANNED: Mapping[int, Planned] = {}


async def apply_outcomes(
    conn: AsyncConnection[Any],
    schema: str,
    registry: Registry,
    outcomes: Sequence[Outcome],
    *,
    with_rows: bool = True,
    planned: Mapping[int, Planned] = _NOTHING_PLANNED,
) -> Applied:
    """Apply ``outcomes`` and insert their follow-ups, committing both or neither.

    One transaction holds the guarded update of every outcome and the follow-up
    inserts of the rows it changed. Follow-ups come from ``planned`` (evaluated
    before the write) when the row committed is the one they were planned on, else
    the specs run here. A job whose spec fails here, or whose follow-up insert fails,
    is taken out of the batch, which is applied again without it: its neighbours
    still commit, and it is returned in ``rejected`` with its outcome uncommitted. An
    outcome that records a failed follow-up (``followup_failure``) is never rejected
    for its own specs: they go to the outbox, in the same transaction. Jobs that fail
    in a queue with the dead-letter queue on move there in the same transaction, after
    their follow-ups are inserted.

    ``with_rows=False`` is for a batch whose rows nobody reads: no follow-up spec matches
    any of its outcomes and no hook wants them. The update then returns ids only,
    ``Applied.rows`` stays empty, and unless an outcome fails (dead-letter routing
    joins it) the update is one statement with no transaction around it.

    Errors other than a failed follow-up (the database refusing a value, an unreachable
    server) propagate with nothing committed.
    """
    if not with_rows:
        return await _apply_lean(conn, schema, outcomes)
    applied = Applied()
    pending = list(outcomes)
    outboxed: set[int] = {i for i, p in planned.items() if p.outbox}
    while pending:
        by_id = {o.job_id: o for o in pending}
        inserting = False
        try:
            async with conn.transaction():
                rows = await db.job_finalize_many(conn, schema, pending)
                jobs, to_outbox, failed = _followups_of(registry, rows, by_id, planned, outboxed)
                if failed:
                    raise _Rejected(failed)
                inserting = True
                await inserts_db.insert_followups(conn, schema, jobs)
                inserting = False
                for row, outcome in to_outbox:
                    await leave_outbox_rows(
                        conn, schema, outcome.event, [(row.id, outcome_detail(outcome))]
                    )
                # Last: the move deletes the failed jobs' rows, which outbox rows snapshot.
                dead = await dlq_db.dlq_route(
                    conn,
                    schema,
                    [
                        (r.id, failure_reason(terminal=by_id[r.id].terminal))
                        for r in rows
                        if r.state is JobState.FAILED
                    ],
                )
        except _Rejected as rej:
            applied.rejected.extend((by_id[i], err) for i, err in rej.failed.items())
            pending = [o for o in pending if o.job_id not in rej.failed]
            continue
        # The server, not a follow-up: nothing committed, and the finalizer retries the batch.
        except psycopg.OperationalError:
            raise
        except Exception as exc:
            if not inserting:
                raise
            if len(pending) > 1:
                # Find the job whose follow-up cannot be inserted: apply one at a time.
                for outcome in pending:
                    one = await apply_outcomes(conn, schema, registry, [outcome], planned=planned)
                    applied.merge(one)
                return applied
            outcome = pending[0]
            if outcome.followup_failure and outcome.job_id not in outboxed:
                outboxed.add(outcome.job_id)  # its specs go to the outbox: try once more
                continue
            applied.rejected.append(
                (outcome, FollowUpError(f"follow-up insert failed: {error_text(exc)}"))
            )
            return applied
        applied.rows.extend(rows)
        applied.written.update(r.id for r in rows)
        applied.dead_lettered.update(dead)
        return applied
    return applied


def _followups_of(
    registry: Registry,
    rows: Sequence[JobRow],
    outcomes: Mapping[int, Outcome],
    planned: Mapping[int, Planned],
    outboxed: set[int],
) -> tuple[list[NewJob], list[tuple[JobRow, Outcome]], dict[int, FollowUpError]]:
    """The follow-ups to insert, the transitions whose specs go to the outbox, the failures."""
    jobs: list[NewJob] = []
    to_outbox: list[tuple[JobRow, Outcome]] = []
    failed: dict[int, FollowUpError] = {}
    for row in rows:
        outcome = outcomes[row.id]
        if row.id in outboxed:
            if registry.specs_for(row.kind, outcome.event):
                to_outbox.append((row, outcome))
            continue
        plan = planned.get(row.id)
        if plan is not None and plan.expected == row:
            jobs.extend(plan.jobs)
            continue
        try:  # not planned, or planned on a row other than the one that committed
            jobs.extend(plan_row(registry, row, outcome))
        except FollowUpError as exc:
            if outcome.followup_failure:
                to_outbox.append((row, outcome))
            else:
                failed[row.id] = exc
    return jobs, to_outbox, failed


async def _apply_lean(
    conn: AsyncConnection[Any], schema: str, outcomes: Sequence[Outcome]
) -> Applied:
    applied = Applied()
    if not any(o.state is JobState.FAILED for o in outcomes):
        changed = await db.job_finalize_many_ids(conn, schema, outcomes)  # one statement: atomic
        applied.written.update(i for i, _ in changed)
        return applied
    terminal = {o.job_id: o.terminal for o in outcomes}
    async with conn.transaction():
        changed = await db.job_finalize_many_ids(conn, schema, outcomes)
        failed = [
            (i, failure_reason(terminal=terminal[i]))
            for i, state in changed
            if state is JobState.FAILED
        ]
        applied.dead_lettered.update(await dlq_db.dlq_route(conn, schema, failed))
    applied.written.update(i for i, _ in changed)
    return applied
