"""The transitions both clients make: callback resolutions and the operator's actions.

Each function here writes, in one transaction, the guarded update of the job, then its
follow-up jobs (or the outbox rows that owe them), then the dead-letter row of a job that
failed in a queue with the dead-letter queue on: an outcome never commits without its
follow-ups. Callback resolutions (:func:`apply_resolution`) and operator actions
(:func:`cancel_job`, :func:`retry_job`, :func:`drain_queue`) are here, with a sync twin;
worker outcomes (:mod:`wai.transitions._finalize`) and the maintenance rescue
(:mod:`wai.transitions._rescue`), async only, write through the same helpers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from wai import _db_async as db
from wai import _inserts_db_async as inserts_db
from wai._admin import CANCELLABLE_STATES, RETRYABLE_STATES, rejected
from wai._followups import plan_followups
from wai._job import JobRow, JobState
from wai._outcomes import Outcome
from wai._registry import Registry
from wai._tracing import otel
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
    "apply_resolution",
    "cancel_job",
    "drain_queue",
    "leave_outbox_rows",
    "outcome_detail",
    "retry_job",
]


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
    While tracing, a detail without a trace context gets the current span's (a
    resolution's, a rescue's, the caller's), for the follow-ups to store.
    """
    if otel is not None and otel.active():
        carrier = otel.inject()
        if carrier is not None:
            key = otel.TRACE_KEY
            details = [(i, d if key in d else {**d, key: carrier}) for i, d in details]
    await outbox_db.outbox_insert_many(conn, schema, outcome=outcome, details=details)


def outcome_detail(outcome: Outcome) -> dict[str, Any]:
    """The outbox detail of ``outcome``: its error and reason, as follow-up specs get them.

    And the trace context of the span that produced it, when it carries one.
    """
    detail: dict[str, Any] = {"error": outcome.error or "", "reason": outcome.reason or ""}
    if outcome.trace is not None and otel is not None:
        detail[otel.TRACE_KEY] = dict(outcome.trace)
    return detail


async def _leave_outbox_row(
    conn: AsyncConnection[Any], schema: str, row: JobRow, outcome: Outcome
) -> None:
    await leave_outbox_rows(conn, schema, outcome.event, [(row.id, outcome_detail(outcome))])


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
            decision = decide_resolution(expressions, req.payload, req.default_action, job=row)
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
