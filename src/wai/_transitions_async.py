"""Applies guarded transitions and their follow-ups atomically, in batches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import AsyncConnection

from wai import _db_async as db
from wai import _producer_async as producer
from wai.errors import FollowUpError, WaiError
from wai.followups import Applied, plan_followups
from wai.outcomes import Outcome
from wai.registry import Registry

__all__ = ["apply_outcomes"]


class _Rejected(Exception):
    """Rolls a batch back because some of its jobs' follow-up specs failed."""

    def __init__(self, failed: dict[int, FollowUpError]) -> None:
        super().__init__(f"{len(failed)} follow-up failures")
        self.failed = failed


async def apply_outcomes(
    conn: AsyncConnection[Any], schema: str, registry: Registry, outcomes: Sequence[Outcome]
) -> Applied:
    """Apply ``outcomes`` and insert their follow-ups, committing both or neither.

    One transaction holds the guarded update of every outcome and the follow-up
    inserts of the rows it changed. A job whose spec fails (closure raised,
    returned the wrong type, or its follow-up insert failed) is taken out of the
    batch, which is applied again without it: its neighbours still commit, and it
    is returned in ``rejected`` with its outcome uncommitted.
    """
    applied = Applied()
    pending = list(outcomes)
    while pending:
        by_id = {o.job_id: o for o in pending}
        inserting = False
        try:
            async with conn.transaction():
                rows = await db.job_finalize_many(conn, schema, pending)
                plan = plan_followups(registry, rows, by_id)
                if plan.failed:
                    raise _Rejected(plan.failed)
                inserting = True
                inserted = await producer.insert_batch(conn, schema, plan.jobs)
        except _Rejected as rej:
            applied.rejected.extend((by_id[i], err) for i, err in rej.failed.items())
            pending = [o for o in pending if o.job_id not in rej.failed]
            continue
        except WaiError as exc:
            if not inserting:
                raise
            if len(pending) == 1:
                applied.rejected.append(
                    (pending[0], FollowUpError(f"follow-up insert failed: {exc}"))
                )
                return applied
            # Find the job whose follow-up cannot be inserted: apply one at a time.
            for outcome in pending:
                one = await apply_outcomes(conn, schema, registry, [outcome])
                applied.rows.extend(one.rows)
                applied.followups.extend(one.followups)
                applied.rejected.extend(one.rejected)
            return applied
        applied.rows.extend(rows)
        applied.followups.extend(inserted)
        return applied
    return applied
