"""Periodic schedules as registered and as stored, and their firing plans: no I/O."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal, get_args

from wai._inserts import EnqueueRequest, NewJob, build_job
from wai._storable import check_text
from wai.cron._expr import CronExpression, due_fires, parse_zone
from wai.errors import ValidationError

__all__ = [
    "CRON_METADATA_KEY",
    "MissedFirePolicy",
    "Periodic",
    "Schedule",
    "check_name",
    "fire_plan",
]

MissedFirePolicy = Literal["coalesce", "catch_up"]

#: The metadata key a fired job carries: ``{"name": ..., "fire_time": ISO 8601}``,
#: plus ``"manual": true`` for :meth:`trigger_cron`.
CRON_METADATA_KEY: Final = "wai.cron"

#: The most fires one schedule enqueues in one pass (``catch_up``); the rest follow.
MAX_FIRES_PER_PASS: Final = 1000


def check_name(name: object) -> str:
    """Return ``name`` if it can name a schedule (1-200 storable characters)."""
    if not isinstance(name, str) or not 1 <= len(name) <= 200:
        raise ValidationError(f"a schedule name is 1-200 characters, got {name!r}")
    check_text(name, "schedule name")
    return name


@dataclass(frozen=True, slots=True, kw_only=True)
class Periodic:
    """One schedule as registered in code with ``client.periodic(...)``."""

    name: str
    expr: CronExpression
    timezone: str
    request: EnqueueRequest
    missed_fire_policy: MissedFirePolicy

    @classmethod
    def build(
        cls,
        name: str,
        expr: str,
        args: Any,
        *,
        timezone: str = "UTC",
        kind: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        tags: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        missed_fire_policy: str = "coalesce",
    ) -> Periodic:
        """Validate a registration; raises :class:`wai.ValidationError` with the reason."""
        check_name(name)
        parsed = CronExpression.parse(expr)
        parse_zone(timezone)
        if missed_fire_policy not in get_args(MissedFirePolicy):
            raise ValidationError(
                f"missed_fire_policy must be 'coalesce' or 'catch_up', got {missed_fire_policy!r}"
            )
        request = EnqueueRequest(
            args,
            kind=kind,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            # Materialized: the request is built into a job again at every upsert (an iterator
            # would be spent); a str is kept whole, for the tags check to refuse.
            tags=tuple(tags) if not isinstance(tags, str) else tags,
            metadata=metadata,
        )
        job = build_job(request, default_queue=lambda _kind: None)  # validates args and options
        if CRON_METADATA_KEY in json.loads(job.metadata):
            raise ValidationError(f"metadata key {CRON_METADATA_KEY!r} is reserved for wai")
        return cls(
            name=name,
            expr=parsed,
            timezone=timezone,
            request=request,
            missed_fire_policy=missed_fire_policy,  # pyright: ignore[reportArgumentType]
        )

    def job(
        self,
        default_queue: Callable[[str], str | None],
        default_max_attempts: Callable[[str], int | None],
    ) -> NewJob:
        """The job row template, with the kind's registered queue and retry budget."""
        return build_job(
            self.request, default_queue=default_queue, default_max_attempts=default_max_attempts
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A stored schedule, as operators see it (:meth:`list_cron`).

    ``cursor_at`` is the fire time up to which the schedule has fired (or, for
    a new schedule, when it was created); ``next_fire_at`` the next fire time
    after it and after now (None while paused or when it cannot be computed).
    """

    name: str
    expr: str
    timezone: str
    kind: str
    queue: str
    args: dict[str, Any]
    priority: int
    max_attempts: int
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    missed_fire_policy: str
    cursor_at: datetime
    last_fire_at: datetime | None
    paused_at: datetime | None
    created_at: datetime
    updated_at: datetime
    next_fire_at: datetime | None

    @property
    def paused(self) -> bool:
        """Whether the schedule is paused."""
        return self.paused_at is not None

    @classmethod
    def from_record(cls, rec: dict[str, Any], now: datetime) -> Schedule:
        """Build from a ``cron_schedules`` record; ``now`` is the database clock."""
        nxt: datetime | None = None
        if rec["paused_at"] is None:
            nxt = next_fire(rec["expr"], rec["timezone"], max(rec["cursor_at"], now))
        return cls(
            name=rec["name"],
            expr=rec["expr"],
            timezone=rec["timezone"],
            kind=rec["kind"],
            queue=rec["queue"],
            args=rec["args"],
            priority=rec["priority"],
            max_attempts=rec["max_attempts"],
            tags=tuple(rec["tags"] or ()),
            metadata=rec["metadata"] or {},
            missed_fire_policy=rec["missed_fire_policy"],
            cursor_at=rec["cursor_at"],
            last_fire_at=rec["last_fire_at"],
            paused_at=rec["paused_at"],
            created_at=rec["created_at"],
            updated_at=rec["updated_at"],
            next_fire_at=nxt,
        )


def next_fire(expr: str, timezone: str, after: datetime) -> datetime | None:
    """A stored schedule's first fire time after ``after``; None if this version cannot
    read its expression or zone (or it never fires again)."""
    try:
        return CronExpression.parse(expr).next_after(after, parse_zone(timezone))
    except ValidationError:
        return None


def fire_plan(
    expr: str, timezone: str, policy: str, cursor: datetime, now: datetime
) -> list[datetime]:
    """The fire times a stored schedule owes at ``now`` (ascending, maybe empty).

    ``coalesce`` owes only the latest fire time in (cursor, now]; ``catch_up``
    every one, at most :data:`MAX_FIRES_PER_PASS` per pass. Raises
    :class:`wai.ValidationError` for an expression or zone this version cannot read.
    """
    if policy not in get_args(MissedFirePolicy):
        raise ValidationError(f"unknown missed_fire_policy {policy!r}")
    return due_fires(
        CronExpression.parse(expr),
        parse_zone(timezone),
        cursor,
        now,
        policy,  # pyright: ignore[reportArgumentType]
        limit=MAX_FIRES_PER_PASS,
    )
