"""Every transition of a job that ends or closes an attempt, with what commits with it.

Each function here writes, in one transaction, the guarded update of the job, then its
follow-up jobs (or the outbox rows that owe them), then the dead-letter row of a job that
failed in a queue with the dead-letter queue on: an outcome never commits without its
follow-ups. Worker outcomes (:func:`apply_outcomes`), callback resolutions
(:func:`apply_resolution`) and operator actions (:func:`cancel_job`, :func:`retry_job`,
:func:`drain_queue`) are here; the maintenance rescue, async only, is in
:mod:`wai.transitions._rescue` and writes through the same helpers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import AsyncConnection

from wai import _db_async as db
from wai import _inserts_db_async as inserts_db
from wai._admin import CANCELLABLE_STATES, RETRYABLE_STATES, rejected
from wai._followups import Applied, error_text, plan_followups, plan_row
from wai._inserts import NewJob
from wai._job import JobRow, JobState
from wai._outcomes import Outcome
from wai._registry import Registry
from wai.callbacks import (
    Resolved,
    ResolveRequest,
    decide_resolution,
    payload_json,
    resolution_outcome,
)
from wai.callbacks import _queries_async as callback_db
from wai.dlq import _queries_async as dlq_db
from wai.dlq import failure_reason
from wai.errors import FollowUpError, JobNotFound, WaiError
from wai.outbox import _queries_async as outbox_db

__all__ = [
    "Planned",
    "apply_outcomes",
    "apply_resolution",
    "cancel_job",
    "drain_queue",
    "leave_outbox_rows",
    "retry_job",
]


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
                    await _leave_outbox_row(conn, schema, row, outcome)
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


async def leave_outbox_rows(
    conn: AsyncConnection[Any],
    schema: str,
    outcome: str,
    details: Sequence[tuple[int, dict[str, Any]]],
) -> None:
    """Leave the outbox rows that owe the ``outcome`` follow-ups of transitions just made.

    For a transition whose follow-up specs this process does not hold (a CLI, a web
    process, the maintenance leader) or must not run here (an operator's action runs no
    user code): a process that holds the specs dispatches them later. Call it inside the
    transition's transaction, after the guarded update and before any dead-letter move.
    """
    await outbox_db.outbox_insert_many(conn, schema, outcome=outcome, details=details)


def _outcome_detail(outcome: Outcome) -> dict[str, Any]:
    return {"error": outcome.error or "", "reason": outcome.reason or ""}


async def _leave_outbox_row(
    conn: AsyncConnection[Any], schema: str, row: JobRow, outcome: Outcome
) -> None:
    await leave_outbox_rows(conn, schema, outcome.event, [(row.id, _outcome_detail(outcome))])


async def _apply_lean(
    conn: AsyncConnection[Any], schema: str, outcomes: Sequence[Outcome]
) -> Applied:
    applied = Applied()
    if not any(o.state is JobState.FAILED for o in outcomes):
        await db.job_finalize_many_ids(conn, schema, outcomes)  # one statement: atomic
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
    return applied


async def _resolve_row(
    conn: AsyncConnection[Any], schema: str, req: ResolveRequest
) -> JobRow | None:
    cid = req.callback_id
    match req.action:
        case "complete":
            return await callback_db.job_callback_complete(
                conn, schema, callback_id=cid, payload=req.payload
            )
        case "fail":
            return await callback_db.job_callback_fail(
                conn, schema, callback_id=cid, error=req.error or "", expression=req.expression
            )
        case "retry":
            return await callback_db.job_callback_retry(
                conn, schema, callback_id=cid, error=req.error or ""
            )
        case "resume":
            return await callback_db.job_callback_resume(
                conn, schema, callback_id=cid, payload=req.payload or "null"
            )
        case _:
            assert req.action == "heartbeat"
            assert req.timeout is not None
            return await callback_db.job_callback_heartbeat(
                conn, schema, callback_id=cid, timeout=req.timeout
            )


async def _followups(
    conn: AsyncConnection[Any], schema: str, registry: Registry, row: JobRow, outcome: Outcome
) -> None:
    if not registry.specs_for(row.kind, outcome.event):
        # No spec here (a CLI, a bare web process): the durable record of the outcome,
        # dispatched later by a process that holds the specs.
        await _leave_outbox_row(conn, schema, row, outcome)
        return
    plan = plan_followups(registry, [row], {row.id: outcome})
    if plan.failed:
        raise plan.failed[row.id]
    try:
        await inserts_db.insert_followups(conn, schema, plan.jobs)
    except WaiError as exc:
        raise FollowUpError(f"follow-up insert failed: {exc}") from exc


async def apply_resolution(
    conn: AsyncConnection[Any], schema: str, registry: Registry, req: ResolveRequest
) -> Resolved:
    """Apply one callback resolution and its follow-ups, committing both or neither.

    The guarded update matches the unresolved callback id (else
    :class:`wai.CallbackNotFound`). When ``registry`` holds specs for the job's
    kind and outcome they run in the same transaction, and a failing spec rolls
    the resolution back (:class:`wai.FollowUpError`: the sender can retry);
    otherwise an outbox row is left in the same transaction. On a caller's open
    transaction this is a savepoint of it.
    """
    async with conn.transaction():
        if req.action == "resolve":
            locked = await callback_db.job_callback_lock(conn, schema, req.callback_id)
            if locked is None:
                raise req.not_found()
            row, expressions = locked
            decision = decide_resolution(expressions, req.payload, req.default_action)
            if decision.action == "ignore":
                return Resolved(row=row, outcome=None, action="ignored")
            req = ResolveRequest(
                action=decision.action,
                callback_id=req.callback_id,
                payload=payload_json(decision.payload, keep_none=False),
                error=decision.error,
                expression=decision.expression,
            )
            payload = decision.payload
        else:
            payload = None
        changed = await _resolve_row(conn, schema, req)
        if changed is None:
            raise req.not_found()
        outcome = resolution_outcome(req.action, changed, req.error)
        if outcome is not None:
            await _followups(conn, schema, registry, changed, outcome)
        if changed.state is JobState.FAILED:
            # fail_external fails the job now; a retry_external with no attempt left exhausts it
            terminal = outcome is None or outcome.terminal
            await dlq_db.dlq_route(conn, schema, [(changed.id, failure_reason(terminal=terminal))])
    return Resolved(row=changed, outcome=outcome, action=req.action, payload=payload)


#: The outbox detail of an operator's cancel, and of a drain's.
_CANCELLED = {"reason": "cancelled by operator"}
_DRAINED = {"reason": "cancelled by operator: queue drained"}


async def cancel_job(conn: AsyncConnection[Any], schema: str, job_id: int) -> JobRow:
    """Cancel one job that has not finished, with the outbox row of its follow-ups.

    Its worker, if it runs or waits in place, is notified on commit. Raises
    :class:`wai.JobNotFound`, or :class:`wai.InvalidStateError` for a finished job.
    """
    async with conn.transaction():
        found = await db.job_cancel(conn, schema, job_id)
        if found is None:
            raise JobNotFound(f"no job with id {job_id}")
        state, row = found
        if row is None:
            raise rejected("cancel", job_id, state, CANCELLABLE_STATES)
        await leave_outbox_rows(conn, schema, "cancelled", [(row.id, _CANCELLED)])
    return row


async def retry_job(conn: AsyncConnection[Any], schema: str, job_id: int) -> JobRow:
    """Make a failed, cancelled or waiting_external job available now (no follow-ups).

    Raises :class:`wai.JobNotFound`, or :class:`wai.InvalidStateError` for a job in
    another state.
    """
    found = await db.job_retry(conn, schema, job_id)  # one statement: atomic on its own
    if found is None:
        raise JobNotFound(f"no job with id {job_id}")
    state, row = found
    if row is None:
        raise rejected("retry", job_id, state, RETRYABLE_STATES)
    return row


async def drain_queue(conn: AsyncConnection[Any], schema: str, queue: str) -> int:
    """Cancel every job of ``queue`` waiting to run, with their outbox rows; how many."""
    async with conn.transaction():
        ids = await db.queue_drain(conn, schema, queue)
        await leave_outbox_rows(conn, schema, "cancelled", [(i, _DRAINED) for i in ids])
    return len(ids)
