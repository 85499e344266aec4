"""Follow-up outbox methods shared by the async client (source of the sync client)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from psycopg import AsyncConnection

from wai import _db_async as db
from wai._translate import translate_errors
from wai.errors import OutboxRowNotFound, ValidationError
from wai.outbox import OutboxEntry, OutboxStats, check_outbox_state

__all__ = ["AsyncOutboxMixin"]


def _check_id(outbox_id: object) -> int:
    if isinstance(outbox_id, bool) or not isinstance(outbox_id, int) or not 1 <= outbox_id < 2**63:
        raise ValidationError(f"an outbox id is a positive 64-bit integer, got {outbox_id!r}")
    return outbox_id


class AsyncOutboxMixin:
    """List, count, retry and discard the rows of the follow-up outbox.

    A row is ``pending`` while sweepers dispatch it (and retry with backoff when
    that fails) and ``failed`` once it failed ``outbox_max_attempts`` times; see
    :mod:`wai.outbox`.
    """

    schema: str

    def connection(self) -> AbstractAsyncContextManager[AsyncConnection[Any]]:
        """Borrow a connection (provided by the client)."""
        raise NotImplementedError

    @asynccontextmanager
    async def _outbox_db(self) -> AsyncIterator[AsyncConnection[Any]]:
        # a pooled connection whose database errors become wai errors
        async with self.connection() as conn:
            with translate_errors(self.schema):
                yield conn

    async def outbox_list(
        self,
        *,
        state: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        after_id: int | None = None,
    ) -> list[OutboxEntry]:
        """Outbox rows, oldest first, each with its attempts and last error.

        ``state`` is None (every row), ``"pending"`` or ``"failed"``; ``kind``
        keeps the rows of one trigger kind; ``after_id`` continues after the
        last entry of a full page.
        """
        state = check_outbox_state(state)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ValidationError(f"limit must be 1..10000, got {limit!r}")
        after = _check_id(after_id) if after_id is not None else None
        async with self._outbox_db() as conn:
            return await db.outbox_list(
                conn, self.schema, state=state, kind=kind, after=after, limit=limit
            )

    async def outbox_stats(self) -> OutboxStats:
        """How many outbox rows are pending and how many failed (see :class:`wai.OutboxStats`)."""
        async with self._outbox_db() as conn:
            return await db.outbox_stats(conn, self.schema)

    async def outbox_retry(self, outbox_id: int) -> OutboxEntry:
        """Make outbox row ``outbox_id`` due now, with a fresh budget of attempts.

        A failed row becomes pending again; ``attempts`` restarts at 0 and
        ``last_error`` stays until the next attempt replaces it (or the row is
        dispatched and deleted). The next sweep of a process holding specs for its
        kind and outcome dispatches it. Raises :class:`wai.OutboxRowNotFound` when
        no row has that id (it may have been dispatched meanwhile).
        """
        outbox_id = _check_id(outbox_id)
        async with self._outbox_db() as conn:
            entry = await db.outbox_retry(conn, self.schema, outbox_id=outbox_id)
        if entry is None:
            raise OutboxRowNotFound(
                f"no outbox row with id {outbox_id}: dispatched, discarded, or never there"
            )
        return entry

    async def outbox_discard(self, outbox_id: int) -> bool:
        """Delete outbox row ``outbox_id``: its follow-ups will never be inserted.

        Returns whether the row existed. Waits for a sweeper dispatching the row
        right now; if that dispatch succeeded, there is nothing left to discard.
        """
        outbox_id = _check_id(outbox_id)
        async with self._outbox_db() as conn:
            return await db.outbox_discard(conn, self.schema, outbox_id=outbox_id)
