"""Callback resolutions behind the async client (source of the sync client)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from psycopg import AsyncConnection

from wai._core_async import AsyncClientCore, borrow, translated
from wai._job import JobRow, JobState
from wai._kinds import check_int, dumps, validate_queue
from wai._storable import check_text
from wai._tracing import otel
from wai._translate import translate_errors
from wai.callbacks import _queries_async as callback_db
from wai.callbacks._models import (
    DEFAULT_ACTIONS,
    RETRY_ERROR,
    CallbackResolution,
    Resolved,
    ResolveRequest,
    check_error,
    check_timeout,
    log_resolved,
    parse_callback_id,
    payload_json,
)
from wai.callbacks._waiting import (
    TIMEOUT_SCAN,
    CallbackTimeout,
    WaitingJob,
    decode_waiting_cursor,
)
from wai.errors import CallbackNotFound, InvalidStateError, ValidationError
from wai.transitions._apply_async import apply_resolution

if TYPE_CHECKING:
    from wai._client_base_async import AsyncTransaction

__all__ = ["AsyncCallbackOps", "newest_first"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _complete(callback_id: object, payload: Any) -> ResolveRequest:
    return ResolveRequest(
        action="complete",
        callback_id=parse_callback_id(callback_id),
        payload=payload_json(payload, keep_none=False),
    )


def _fail(callback_id: object, error: object) -> ResolveRequest:
    return ResolveRequest(
        action="fail", callback_id=parse_callback_id(callback_id), error=check_error(error)
    )


def _retry(callback_id: object) -> ResolveRequest:
    return ResolveRequest(
        action="retry", callback_id=parse_callback_id(callback_id), error=RETRY_ERROR
    )


def _resume(callback_id: object, payload: Any) -> ResolveRequest:
    return ResolveRequest(
        action="resume",
        callback_id=parse_callback_id(callback_id),
        payload=payload_json(payload, keep_none=True),
    )


def _heartbeat(callback_id: object, timeout: object) -> ResolveRequest:
    return ResolveRequest(
        action="heartbeat",
        callback_id=parse_callback_id(callback_id),
        timeout=check_timeout(timeout),
    )


def _resolve(callback_id: object, payload: Any, default_action: object) -> ResolveRequest:
    if default_action not in DEFAULT_ACTIONS:
        raise ValidationError(
            f"default_action must be one of {', '.join(DEFAULT_ACTIONS)}, got {default_action!r}"
        )
    dumps(payload, "callback payload")
    return ResolveRequest(
        action="resolve",
        callback_id=parse_callback_id(callback_id),
        payload=payload,
        default_action=str(default_action),
    )


async def _refuse_parked(conn: AsyncConnection[Any], schema: str, req: ResolveRequest) -> None:
    """Raise InvalidStateError when a resume found the callback's job parked, not waiting.

    A job parked by returning ``WaitForCallback`` has no handler to hand a payload to:
    resuming it would leave an ownerless ``running`` row. The callback stays valid.
    """
    if req.action != "resume":
        return
    job_id = await callback_db.job_callback_parked(conn, schema, req.callback_id)
    if job_id is not None:
        raise InvalidStateError(
            f"cannot resume callback {req.callback_id}: job {job_id} was parked by returning "
            "WaitForCallback, so no handler waits in place for a payload; resolve it with "
            "complete_external (payload kept as callback_result), fail_external or "
            "retry_external. Nothing was changed.",
            state=JobState.WAITING_EXTERNAL.value,
        )


def _resolution(resolved: Resolved) -> CallbackResolution:
    action = {"complete": "completed", "fail": "failed"}.get(resolved.action, "ignored")
    return CallbackResolution(
        action=action,  # pyright: ignore[reportArgumentType]
        job=resolved.row,
        payload=resolved.payload,
    )


class AsyncCallbackOps:
    """Resolve external callbacks from any process: ``complete_external`` and friends.

    Each resolution is one guarded update on the callback id: an unknown, stale or
    already-resolved id raises :class:`wai.CallbackNotFound`, and two racing
    resolutions apply once. Follow-ups of the outcome (completed, exhausted,
    retried) commit in the same transaction when this client's registry holds
    specs for the kind and outcome — a failing spec rolls the resolution back and
    raises :class:`wai.FollowUpError`, so the sender can retry. A client without
    such specs leaves a durable outbox row instead, dispatched by a worker that
    holds them. The ``*_in_tx`` variants run inside ``client.transaction()``.
    """

    def __init__(self, core: AsyncClientCore, on_resolved: Callable[[Resolved], None]) -> None:
        self._core = core
        self._on_resolved = on_resolved

    async def _apply(self, req: ResolveRequest, tx: AsyncTransaction | None) -> Resolved:
        if otel is not None and otel.active():
            # one span per resolution; the follow-ups it enqueues store its context
            with otel.resolving(req.action, req.callback_id) as span:
                resolved = await self._resolve(req, tx)
                outcome = resolved.outcome
                span.resolved(resolved.row, resolved.action, outcome and outcome.event)
                return resolved
        return await self._resolve(req, tx)

    async def _resolve(self, req: ResolveRequest, tx: AsyncTransaction | None) -> Resolved:
        schema, registry = self._core.schema, self._core.registry
        if tx is not None:
            with translate_errors(schema):
                try:
                    resolved = await apply_resolution(tx.connection, schema, registry, req)
                except CallbackNotFound:
                    await _refuse_parked(tx.connection, schema, req)
                    raise
            # Logs and hooks hear of it only once the caller's transaction commits.
            tx.after_commit.append(functools.partial(self._committed, resolved, req.callback_id))
            return resolved
        async with borrow(self._core) as conn:
            with translate_errors(schema):
                try:
                    resolved = await apply_resolution(conn, schema, registry, req)
                except CallbackNotFound:
                    await _refuse_parked(conn, schema, req)
                    raise
        self._committed(resolved, req.callback_id)
        return resolved

    def _committed(self, resolved: Resolved, callback_id: UUID) -> None:
        log_resolved(resolved, callback_id)
        self._on_resolved(resolved)

    async def complete_external(self, callback_id: Any, payload: Any = None) -> JobRow:
        """Complete the job waiting on ``callback_id``; returns its ``completed`` row."""
        return (await self._apply(_complete(callback_id, payload), None)).row

    async def complete_external_in_tx(
        self, tx: AsyncTransaction, callback_id: Any, payload: Any = None
    ) -> JobRow:
        """:meth:`complete_external` inside ``tx`` (from ``client.transaction()``)."""
        return (await self._apply(_complete(callback_id, payload), tx)).row

    async def fail_external(self, callback_id: Any, error: str) -> JobRow:
        """Fail the job waiting on ``callback_id`` for good, whatever attempts remain."""
        return (await self._apply(_fail(callback_id, error), None)).row

    async def fail_external_in_tx(
        self, tx: AsyncTransaction, callback_id: Any, error: str
    ) -> JobRow:
        """:meth:`fail_external` inside ``tx`` (from ``client.transaction()``)."""
        return (await self._apply(_fail(callback_id, error), tx)).row

    async def retry_external(self, callback_id: Any) -> JobRow:
        """Run the parked job of ``callback_id`` again now, as its next attempt."""
        return (await self._apply(_retry(callback_id), None)).row

    async def retry_external_in_tx(self, tx: AsyncTransaction, callback_id: Any) -> JobRow:
        """:meth:`retry_external` inside ``tx`` (from ``client.transaction()``)."""
        return (await self._apply(_retry(callback_id), tx)).row

    async def resume_external(self, callback_id: Any, payload: Any = None) -> JobRow:
        """Hand ``payload`` to the handler waiting in ``job.wait_for_callback``."""
        return (await self._apply(_resume(callback_id, payload), None)).row

    async def resume_external_in_tx(
        self, tx: AsyncTransaction, callback_id: Any, payload: Any = None
    ) -> JobRow:
        """:meth:`resume_external` inside ``tx`` (from ``client.transaction()``)."""
        return (await self._apply(_resume(callback_id, payload), tx)).row

    async def heartbeat_callback(self, callback_id: Any, timeout: float = 3600.0) -> JobRow:
        """Push the timeout of ``callback_id`` out to ``timeout`` seconds from now."""
        return (await self._apply(_heartbeat(callback_id, timeout), None)).row

    async def heartbeat_callback_in_tx(
        self, tx: AsyncTransaction, callback_id: Any, timeout: float = 3600.0
    ) -> JobRow:
        """:meth:`heartbeat_callback` inside ``tx`` (from ``client.transaction()``)."""
        return (await self._apply(_heartbeat(callback_id, timeout), tx)).row

    async def resolve_callback(
        self, callback_id: Any, payload: Any, default_action: str = "ignore"
    ) -> CallbackResolution:
        """Decide with the callback's CEL expressions what ``payload`` means, and apply it."""
        return _resolution(await self._apply(_resolve(callback_id, payload, default_action), None))

    async def resolve_callback_in_tx(
        self, tx: AsyncTransaction, callback_id: Any, payload: Any, default_action: str = "ignore"
    ) -> CallbackResolution:
        """:meth:`resolve_callback` inside ``tx`` (from ``client.transaction()``)."""
        return _resolution(await self._apply(_resolve(callback_id, payload, default_action), tx))

    # -- what operators see ---------------------------------------------------------

    async def list_waiting(
        self,
        *,
        queue: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[WaitingJob]:
        """Jobs parked on a callback, soonest timeout first; continue ``after`` a cursor."""
        _check_filters(queue, kind)
        limit = check_int("limit", limit, 1, 10_000)
        cursor = decode_waiting_cursor(after) if after is not None else None
        async with translated(self._core) as conn:
            return await callback_db.job_waiting_list(
                conn, self._core.schema, queue=queue, kind=kind, after=cursor, limit=limit
            )

    async def list_callback_timeouts(
        self, *, queue: str | None = None, kind: str | None = None, limit: int = 50
    ) -> list[CallbackTimeout]:
        """Recent callback timeouts, newest first (see the client method)."""
        _check_filters(queue, kind)
        limit = check_int("limit", limit, 1, 1000)
        async with translated(self._core) as conn:
            found = await callback_db.job_callback_timeouts(
                conn, self._core.schema, queue=queue, kind=kind, scan=TIMEOUT_SCAN
            )
        return newest_first(found)[:limit]


def _check_filters(queue: str | None, kind: str | None) -> None:
    if queue is not None:
        validate_queue(queue)
    if kind is not None:
        check_text(kind, "kind")


def newest_first(timeouts: list[CallbackTimeout]) -> list[CallbackTimeout]:
    """Newest timeout first; those without a readable time last, newest job first."""
    return sorted(
        timeouts,
        key=lambda t: (t.timed_out_at is not None, t.timed_out_at or _EPOCH, t.job.id),
        reverse=True,
    )
