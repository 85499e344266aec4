"""wai's models as the JSON objects of the admin API, and the JSON responses that carry them.

Each model has one :class:`View`: its dataclass fields as the CLI's ``--json``
prints them (:func:`wai._jsonable.jsonable`: datetimes in ISO 8601, UUIDs as
strings, unique keys in hex), plus the few derived fields the API adds. The
OpenAPI components are built from the same views (:mod:`wai.web._schemas`), so a
field cannot be answered without being documented. Args, metadata and errors are
user data: they are returned as JSON values, never rendered.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

import orjson

from wai._admin import QueueDepth, QueueStats, ThroughputMinute
from wai._flow import RateLimit
from wai._instances import RuntimeInstance
from wai._job import JobRow, Trigger
from wai._jsonable import jsonable
from wai._lineage import Lineage
from wai.callbacks import CallbackTimeout, WaitingJob
from wai.cron import Schedule
from wai.dlq import DlqEntry
from wai.outbox import OutboxEntry, OutboxStats

try:
    from starlette.responses import Response
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("wai.web needs the http extra: pip install 'wai[http]'") from exc

__all__ = [
    "CALLBACK_TIMEOUT",
    "DLQ_ENTRY",
    "JOB",
    "LINEAGE",
    "OUTBOX_ENTRY",
    "OUTBOX_STATS",
    "QUEUE_DEPTH",
    "QUEUE_STATS",
    "RATE_LIMIT",
    "RESPONSE_HEADERS",
    "RUNTIME_INSTANCE",
    "SCHEDULE",
    "THROUGHPUT_MINUTE",
    "TRIGGER",
    "VIEWS",
    "WAITING_JOB",
    "Extra",
    "View",
    "dumps",
    "json_response",
]

M = TypeVar("M")

#: Headers of every answer: no content sniffing (a JSON value is never run as a page),
#: and no caching (job states change; an admin's view must not be served stale).
RESPONSE_HEADERS: Final = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


@dataclass(frozen=True)  # no slots: Extra[M](...) sets __orig_class__
class Extra(Generic[M]):
    """A field the API adds to a model's object (or replaces): its value and its schema."""

    name: str
    value: Callable[[M], object]
    schema: Mapping[str, Any]


@dataclass(frozen=True)
class View(Generic[M]):
    """How the API shows one model: its OpenAPI component name and extra fields."""

    component: str
    model: type[M]
    extras: tuple[Extra[M], ...] = ()
    #: Encodes a model that holds other models, through their own views.
    encoder: Callable[[M], dict[str, Any]] | None = None

    def encode(self, obj: M) -> dict[str, Any]:
        """``obj`` as a JSON object."""
        if self.encoder is not None:
            return self.encoder(obj)
        data: dict[str, Any] = jsonable(obj)
        for extra in self.extras:
            data[extra.name] = jsonable(extra.value(obj))
        return data


JOB: Final = View("Job", JobRow)
TRIGGER: Final = View("Trigger", Trigger)
QUEUE_STATS: Final = View(
    "QueueStats",
    QueueStats,
    (Extra[QueueStats]("total", lambda q: q.total, {"type": "integer"}),),
)
RATE_LIMIT: Final = View("RateLimit", RateLimit)
QUEUE_DEPTH: Final = View(
    "QueueDepth",
    QueueDepth,
    (Extra[QueueDepth]("depth", lambda d: d.depth, {"type": "integer"}),),
)
THROUGHPUT_MINUTE: Final = View("ThroughputMinute", ThroughputMinute)
DLQ_ENTRY: Final = View(
    "DlqEntry",
    DlqEntry,
    (
        Extra[DlqEntry](
            "cursor",
            lambda e: e.cursor,
            {"type": "string", "description": "pass as `before` to list the entries after this"},
        ),
    ),
)
SCHEDULE: Final = View(
    "Schedule", Schedule, (Extra[Schedule]("paused", lambda s: s.paused, {"type": "boolean"}),)
)
OUTBOX_ENTRY: Final = View(
    "OutboxEntry",
    OutboxEntry,
    (
        Extra[OutboxEntry](
            "state", lambda e: e.state, {"type": "string", "enum": ["pending", "failed"]}
        ),
    ),
)
OUTBOX_STATS: Final = View("OutboxStats", OutboxStats)
WAITING_JOB: Final = View(
    "WaitingJob",
    WaitingJob,
    (
        Extra[WaitingJob](
            "callback_id",
            lambda w: w.callback_id,
            {"type": ["string", "null"], "format": "uuid", "description": "the callback's id"},
        ),
        Extra[WaitingJob](
            "timeout_at",
            lambda w: w.timeout_at,
            {"type": "string", "format": "date-time", "description": "when the callback times out"},
        ),
        Extra[WaitingJob](
            "in_place",
            lambda w: w.in_place,
            {
                "type": "boolean",
                "description": "a handler waits in place (job.wait_for_callback), heartbeating",
            },
        ),
        Extra[WaitingJob](
            "cursor",
            lambda w: w.cursor,
            {"type": "string", "description": "pass as `after` to list the jobs after this"},
        ),
    ),
)
CALLBACK_TIMEOUT: Final = View("CallbackTimeout", CallbackTimeout)
RUNTIME_INSTANCE: Final = View(
    "RuntimeInstance",
    RuntimeInstance,
    (
        Extra[RuntimeInstance](
            "specs",
            lambda i: [{"kind": k, "outcome": o, "spec": s} for k, o, s in i.specs],
            {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "kind": {"type": "string"},
                        "outcome": {"type": "string"},
                        "spec": {"type": "string"},
                    },
                    "required": ["kind", "outcome", "spec"],
                },
            },
        ),
    ),
)


def _lineage(lineage: Lineage) -> dict[str, Any]:
    return {
        "job": JOB.encode(lineage.job),
        "ancestors": [JOB.encode(r) for r in lineage.ancestors],
        "followups": [JOB.encode(r) for r in lineage.followups],
        "owed": [OUTBOX_ENTRY.encode(e) for e in lineage.owed],
        "truncated": lineage.truncated,
    }


LINEAGE: Final = View("Lineage", Lineage, encoder=_lineage)

#: Every view, in the order of the OpenAPI components.
VIEWS: Final[tuple[View[Any], ...]] = (
    JOB,
    TRIGGER,
    QUEUE_STATS,
    RATE_LIMIT,
    QUEUE_DEPTH,
    THROUGHPUT_MINUTE,
    DLQ_ENTRY,
    SCHEDULE,
    OUTBOX_ENTRY,
    OUTBOX_STATS,
    RUNTIME_INSTANCE,
    LINEAGE,
    WAITING_JOB,
    CALLBACK_TIMEOUT,
)


def dumps(data: Any) -> bytes:
    """UTF-8 JSON of plain JSON data (what the views and handlers return).

    What orjson refuses (an integer beyond 64 bits in a job's args) goes to
    :func:`json.dumps`, which writes it exactly.
    """
    try:
        return orjson.dumps(data)
    except orjson.JSONEncodeError:
        return json.dumps(data, allow_nan=False).encode()


def json_response(
    data: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """An ``application/json`` response with :data:`RESPONSE_HEADERS`."""
    return Response(
        dumps(data),
        status_code=status,
        media_type="application/json",
        headers={**RESPONSE_HEADERS, **(headers or {})},
    )
