"""The outbox's operations behind the async client (source of the sync client)."""

from __future__ import annotations

from wai._core_async import AsyncClientCore, translated
from wai.errors import OutboxRowNotFound, ValidationError
from wai.outbox import _queries_async as outbox_db
from wai.outbox._models import OutboxEntry, OutboxStats, check_outbox_state

__all__ = ["AsyncOutboxOps"]


def _check_id(outbox_id: object) -> int:
    if isinstance(outbox_id, bool) or not isinstance(outbox_id, int) or not 1 <= outbox_id < 2**63:
        raise ValidationError(f"an outbox id is a positive 64-bit integer, got {outbox_id!r}")
    return outbox_id


class AsyncOutboxOps:
    """List, count, retry and discard the rows of the follow-up outbox.

    A row is ``pending`` while sweepers dispatch it (and retry with backoff when
    that fails) and ``failed`` once it failed ``outbox_max_attempts`` times; see
    :mod:`wai.outbox`.
    """

    def __init__(self, core: AsyncClientCore) -> None:
        self._core = core

    async def outbox_list(
        self,
        *,
        state: str | None = None,
        kind: str | None = None,
        limit: int = 100,
        after_id: int | None = None,
    ) -> list[OutboxEntry]:
        """Outbox rows, oldest first, each with its attempts and last error."""
        state = check_outbox_state(state)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ValidationError(f"limit must be 1..10000, got {limit!r}")
        after = _check_id(after_id) if after_id is not None else None
        async with translated(self._core) as conn:
            return await outbox_db.outbox_list(
                conn, self._core.schema, state=state, kind=kind, after=after, limit=limit
            )

    async def outbox_stats(self) -> OutboxStats:
        """How many outbox rows are pending and how many failed (see :class:`wai.OutboxStats`)."""
        async with translated(self._core) as conn:
            return await outbox_db.outbox_stats(conn, self._core.schema)

    async def outbox_retry(self, outbox_id: int) -> OutboxEntry:
        """Make outbox row ``outbox_id`` due now, with a fresh budget of attempts."""
        outbox_id = _check_id(outbox_id)
        async with translated(self._core) as conn:
            entry = await outbox_db.outbox_retry(conn, self._core.schema, outbox_id=outbox_id)
        if entry is None:
            raise OutboxRowNotFound(
                f"no outbox row with id {outbox_id}: dispatched, discarded, or never there"
            )
        return entry

    async def outbox_discard(self, outbox_id: int) -> bool:
        """Delete outbox row ``outbox_id``: its follow-ups will never be inserted."""
        outbox_id = _check_id(outbox_id)
        async with translated(self._core) as conn:
            return await outbox_db.outbox_discard(conn, self._core.schema, outbox_id=outbox_id)
