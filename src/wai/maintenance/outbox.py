"""The outbox sweeper: dispatches follow-ups of transitions made without user code."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from wai import _inserts_db_async as inserts_db
from wai._followups import decode_for, evaluate
from wai._job import JobRow
from wai._logging import emit, job_extra
from wai._pace import IdlePace
from wai._registry import Registry
from wai._retry import outbox_backoff
from wai._text import storable
from wai._tracing import otel
from wai.errors import FollowUpError, SerializationError
from wai.maintenance._service import PeriodicService
from wai.outbox import _queries_async as outbox_db

__all__ = ["OutboxSweeper", "SweepResult", "describe"]

logger = logging.getLogger("wai.maintenance")


@dataclass(frozen=True, slots=True)
class SweepResult:
    """Outbox rows dispatched and rows whose dispatch failed (and will be retried) in one
    pass, and the seconds until the next pending row of the sweeper's (kind, outcome)
    pairs is due by the database clock (None: no row is pending, or the pass did not
    look because it stopped with rows left)."""

    dispatched: int
    failed: int
    due_in: float | None = None


def describe(exc: BaseException) -> str:
    """``"Type: message"`` of a failed dispatch, storable in the row's ``last_error``."""
    name = type(exc).__name__
    try:
        text = str(exc)
    except Exception:  # a hostile __str__ must not stop the failure from being recorded
        text = "<the exception's message could not be read>"
    return storable(f"{name}: {text}" if text else name)


class OutboxSweeper(PeriodicService):
    """Runs in every process whose registry has specs; not leader-gated.

    Each pass locks a batch of due outbox rows of the (kind, outcome) pairs it
    holds specs for (``SKIP LOCKED``, so sweepers never take each other's rows)
    in one transaction and dispatches each row in a savepoint of its own: run the
    closures, insert the follow-ups the lineage says are still missing, delete
    the row. Any failure of one row — a closure raising anything, args that do
    not decode, a follow-up insert PostgreSQL refuses — rolls back that row's
    savepoint only: the row records ``"Type: message"`` in ``last_error``, one
    more attempt and a backoff (2 s doubling, at most one hour), and the rows
    behind it are dispatched in the same pass. The failure that reaches
    *max_attempts* marks the row failed (``failed_at``): sweepers leave it until
    an operator retries or discards it. A lost connection ends the pass (logged);
    the next pass retries everything it had not committed.

    With a ``pace`` it sleeps, while idle, until the next row is due (or the idle
    cap); a row written or made due sooner meanwhile wakes it (``<schema>.outbox``,
    migration 0015).
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[AsyncConnection[Any]],
        schema: str,
        registry: Registry,
        *,
        interval: float,
        batch_size: int = 100,
        max_attempts: int = 10,
        pace: IdlePace | None = None,
    ) -> None:
        super().__init__(pool, schema, interval=interval, pace=pace)
        self._registry = registry
        self._batch_size = batch_size
        self._max_attempts = max_attempts

    async def run_once(self) -> SweepResult:
        """Dispatch due rows until none is left (or a bounded number of passes ran)."""
        pairs = sorted(self._registry.specs)
        dispatched = failed = 0
        if not pairs:
            return SweepResult(0, 0)
        due_in: float | None = None
        # Bounded: a large backlog is worked off over several passes.
        for _ in range(10):
            done, bad, seen, due_in = await self._sweep(pairs)
            dispatched += done
            failed += bad
            if seen < self._batch_size:
                break
        return SweepResult(dispatched, failed, due_in)

    def idle_state(self, result: object) -> tuple[bool, float | None]:
        """Busy when it dispatched or failed a row; next due when the next row's time comes."""
        assert isinstance(result, SweepResult)
        return bool(result.dispatched or result.failed), result.due_in

    async def _sweep(self, pairs: list[tuple[str, str]]) -> tuple[int, int, int, float | None]:
        done = bad = 0
        due_in: float | None = None
        async with self._pool.connection() as conn:
            try:
                async with conn.transaction():
                    rows = await outbox_db.outbox_lock_due(
                        conn, self._schema, pairs=pairs, limit=self._batch_size
                    )
                    for row in rows:
                        if await self._one(conn, row):
                            done += 1
                        else:
                            bad += 1
                    if not rows:
                        # An idle pass: when is the next row due? Asked in the same
                        # transaction, which has nothing to lose if it fails.
                        due_in = await outbox_db.outbox_next_due(conn, self._schema, pairs=pairs)
            except psycopg.Error as exc:
                # Unexpected on a live connection: raised, for repeat() to log (with its
                # traceback, unless the server is the cause: a statement timeout, say).
                if not conn.broken:
                    raise
                # Nothing of this batch committed: the next pass takes the rows again.
                logger.warning("wai: outbox sweep lost its connection (%s); retrying later", exc)
                return 0, 0, 0, None
            if rows and len(rows) < self._batch_size:
                # The last batch of a busy pass, asked once its work has committed: the
                # rows it dispatched are gone, those it failed carry their backoff, a row
                # another sweeper holds counts as due now. Not knowing is being due now.
                try:
                    due_in = await outbox_db.outbox_next_due(conn, self._schema, pairs=pairs)
                except psycopg.Error as exc:
                    logger.warning("wai: outbox sweep could not read the next due row (%s)", exc)
                    due_in = 0.0
        return done, bad, len(rows), due_in

    async def _one(self, conn: AsyncConnection[Any], row: dict[str, Any]) -> bool:
        """Dispatch one locked row in a savepoint; on failure, record it. Whether it went."""
        try:
            async with conn.transaction():  # a savepoint: undone on failure
                await self._dispatch(conn, row)
        except Exception as exc:
            if conn.broken:
                raise  # nothing can be recorded on a lost connection: the pass ends
            error = describe(exc)
            attempt = int(row["attempts"]) + 1
            emit(
                logger,
                logging.WARNING,
                "wai: outbox row %s (job %s, %s) failed, attempt %s of %s: %s; %s",
                row["id"],
                row["job_id"],
                row["outcome"],
                attempt,
                self._max_attempts,
                error,
                "retrying later"
                if attempt < self._max_attempts
                else "marked failed (wai outbox list --state failed)",
                extra=_job_fields(row, outbox_attempt=attempt),
            )
            try:
                async with conn.transaction():
                    await outbox_db.outbox_backoff(
                        conn,
                        self._schema,
                        outbox_id=row["id"],
                        error=error,
                        delay=outbox_backoff(attempt),
                        max_attempts=self._max_attempts,
                    )
            except Exception:
                if conn.broken:
                    raise
                # The row stays as it was and is tried again next pass; its neighbours go on.
                emit(
                    logger,
                    logging.ERROR,
                    "wai: could not record the failure of outbox row %s",
                    row["id"],
                    exc_info=True,
                    extra=_job_fields(row),
                )
            return False
        return True

    async def _dispatch(self, conn: AsyncConnection[Any], row: dict[str, Any]) -> None:
        job = JobRow.from_json(row["job"])
        outcome: str = row["outcome"]
        specs = self._registry.specs_for(row["kind"], outcome)
        already = await outbox_db.outbox_dispatched_specs(
            conn, self._schema, job_id=row["job_id"], run_lease=row["run_lease"], outcome=outcome
        )
        todo = [s for s in specs if s.name not in already]
        if todo:
            try:
                args = decode_for(self._registry, job)
            except SerializationError as exc:
                raise FollowUpError(
                    f"follow-ups of job {job.id}: args do not decode: {exc}"
                ) from exc
            detail: dict[str, Any] = row["detail"] or {}
            new = [
                evaluate(
                    s,
                    args,
                    job,
                    detail,
                    default_queue=self._registry.queue_of,
                    default_max_attempts=self._registry.max_attempts_of,
                )
                for s in todo
            ]
            if otel is not None and otel.active():
                # the context of the span that produced the outcome, kept in the row's detail
                carrier = otel.stored_trace(detail)
                if carrier is not None:
                    new = otel.with_trace(new, carrier)
            await inserts_db.insert_followups(conn, self._schema, new)
        await outbox_db.outbox_delete(conn, self._schema, outbox_id=row["id"])


def _job_fields(row: dict[str, Any], **more: object) -> dict[str, object]:
    """The ``extra`` of a record about outbox ``row``: its job as the row snapshots it.

    ``attempt`` is the job's attempt that had the outcome, not the dispatch's
    (``outbox_attempt``). A snapshot that does not read as a job row leaves the ids.
    """
    fields: dict[str, object] = {"outbox_id": row["id"], "outcome": row["outcome"], **more}
    try:
        return job_extra(JobRow.from_json(row["job"]), **fields)
    except Exception:  # a snapshot of another version's row: what the outbox row says
        return {"job_id": row["job_id"], "kind": row["kind"], **fields}
