"""Text tables, job details and JSON for the CLI's operator commands."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from wai._admin import QueueStats
from wai._instances import RuntimeInstance
from wai._job import JobRow, JobState
from wai._jsonable import jsonable
from wai._lineage import Lineage
from wai.outbox import OutboxEntry

__all__ = [
    "cell",
    "duration",
    "flow_table",
    "has_flow",
    "instances_table",
    "job_detail",
    "jobs_table",
    "json_text",
    "jsonable",
    "kind_limits_table",
    "queues_table",
    "table",
    "when",
]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
# orjson's options for --json: two-space indents like json.dumps(indent=2), and
# datetimes left to jsonable (isoformat keeps an offset's seconds, orjson drops them).
_ORJSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_PASSTHROUGH_DATETIME
# A JSON string (a quote inside one is escaped) or a number, in orjson's output.


def json_text(value: Any) -> str:
    """Indented JSON (two spaces, UTF-8) of :func:`jsonable` ``value``, for ``--json``.

    orjson encodes dataclasses, enums, UUIDs, tuples and dicts itself and asks
    :func:`jsonable` for the rest (datetimes, passed through so that an offset with
    seconds keeps them, bytes, sets, other mappings). What orjson refuses (an
    integer beyond 64 bits, a key that is not a string, a lone surrogate) goes to
    :func:`json.dumps`, which reads the same back.
    """
    try:
        return orjson.dumps(value, default=_to_jsonable, option=_ORJSON_OPTIONS).decode()
    except orjson.JSONEncodeError:
        return json.dumps(jsonable(value), indent=2, ensure_ascii=False)


def _to_jsonable(value: object) -> Any:
    """orjson's ``default``: :func:`jsonable` for a type orjson leaves to it."""
    plain = jsonable(value)
    if plain is value:
        raise TypeError(f"{type(value).__qualname__} is not JSON serializable")
    return plain


def when(moment: datetime | None) -> str:
    """A timestamp as ``YYYY-MM-DD HH:MM:SSZ`` in UTC, or ``-``."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def duration(seconds: float) -> str:
    """A short human duration: ``0s``, ``4.2s``, ``3m05s``, ``2h03m``, ``1d04h``."""
    if seconds < 60:
        return "0s" if seconds < 0.05 else f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def cell(value: object, width: int = 60) -> str:
    """One table cell: control characters flattened to a space, cut at ``width``."""
    text = _CONTROL.sub(" ", str(value)).strip()
    return text if len(text) <= width else text[: width - 3] + "..."


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, right: int = 0) -> str:
    """Columns aligned under ``headers``; the last ``right`` columns are right-aligned."""
    body = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        widths = [max(w, len(v)) for w, v in zip(widths, row, strict=True)]
    first_right = len(headers) - right

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if i >= first_right else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    return "\n".join([line(headers), *(line(r) for r in body)])


def _last_error(row: JobRow) -> str:
    return str(row.errors[-1].get("error", "")) if row.errors else ""


def jobs_table(rows: Sequence[JobRow]) -> str:
    """The ``wai jobs list`` table: one line per job, newest first."""
    return table(
        ["ID", "STATE", "KIND", "QUEUE", "PRI", "ATTEMPT", "RUN AT", "LAST ERROR"],
        (
            [
                r.id,
                r.state.value,
                r.kind,
                r.queue,
                r.priority,
                f"{r.attempt}/{r.max_attempts}",
                when(r.run_at),
                _last_error(r),
            ]
            for r in rows
        ),
    )


def queues_table(stats: Sequence[QueueStats]) -> str:
    """The ``wai queues list`` table: counts by state, pause flag and lag per queue.

    An estimated count (finished jobs on a large table) reads ``~N``.
    """
    states = [s.value for s in JobState]
    headers = [
        "QUEUE",
        "PAUSED",
        *(("WAITING" if s == "waiting_external" else s).upper() for s in states),
        "LAG",
    ]
    return table(
        headers,
        (
            [
                q.name,
                "yes" if q.paused else "no",
                *(f"~{q.counts[s]}" if s in q.estimated else q.counts[s] for s in states),
                duration(q.oldest_available_lag),
            ]
            for q in stats
        ),
        right=len(states) + 1,
    )


def has_flow(q: QueueStats) -> bool:
    """Whether queue ``q`` has flow control to show: a limit, or ordering keys at work."""
    return (
        q.rate_limit is not None
        or q.global_concurrency is not None
        or q.keys_running > 0
        or q.waiting_turn > 0
    )


def flow_table(stats: Sequence[QueueStats]) -> str | None:
    """The flow control of the queues that have some, one line each; None when none has.

    The rate limit with the tokens its bucket holds now, the attempts running against the
    global concurrency, the ordering keys with an attempt running and the available jobs
    waiting for an earlier job of their key.
    """
    rows = [
        [
            q.name,
            str(q.rate_limit) if q.rate_limit is not None else "-",
            f"{q.rate_tokens:.1f}" if q.rate_tokens is not None else "-",
            q.counts.get("running", 0),
            q.global_concurrency if q.global_concurrency is not None else "-",
            q.keys_running,
            q.waiting_turn,
        ]
        for q in stats
        if has_flow(q)
    ]
    if not rows:
        return None
    headers = ["QUEUE", "RATE LIMIT", "TOKENS", "RUNNING", "GLOBAL LIMIT", "KEYS RUNNING",
               "WAITING TURN"]  # fmt: skip
    return table(headers, rows, right=5)


def kind_limits_table(stats: Sequence[QueueStats]) -> str | None:
    """The rate limits of kinds within queues, one line per kind with the tokens its bucket
    holds now, by queue and kind; None when no queue has one."""
    rows = [
        [
            q.name,
            kind,
            str(q.kind_rate_limits[kind]),
            f"{q.kind_tokens[kind]:.1f}" if kind in q.kind_tokens else "-",
        ]
        for q in stats
        for kind in sorted(q.kind_rate_limits)
    ]
    if not rows:
        return None
    return table(["QUEUE", "KIND", "RATE LIMIT", "TOKENS"], rows, right=1)


def _compact(value: Any) -> str:
    return json.dumps(jsonable(value), sort_keys=True)


def job_detail(row: JobRow) -> str:
    """Every field of one job, then its errors oldest first, for ``wai jobs show``."""
    trigger = (
        f"job {row.trigger.job_id} (run lease {row.trigger.run_lease}, "
        f"outcome {row.trigger.outcome}, spec {row.trigger.spec})"
        if row.trigger is not None
        else "-"
    )
    fields: list[tuple[str, object]] = [
        ("id", row.id),
        ("kind", row.kind),
        ("queue", row.queue),
        ("state", row.state.value),
        ("priority", row.priority),
        ("attempt", f"{row.attempt} of {row.max_attempts}"),
        ("run lease", row.run_lease),
        ("created at", when(row.created_at)),
        ("run at", when(row.run_at)),
        ("attempted at", when(row.attempted_at)),
        ("heartbeat at", when(row.heartbeat_at)),
        ("deadline at", when(row.deadline_at)),
        ("finalized at", when(row.finalized_at)),
        ("tags", ", ".join(row.tags) or "-"),
        ("unique key", row.unique_key.hex() if row.unique_key is not None else "-"),
        ("ordering key", row.ordering_key or "-"),
        ("callback id", row.callback_id or "-"),
        ("callback timeout", when(row.callback_timeout_at)),
        ("trigger", trigger),
        ("args", _compact(row.args)),
        ("metadata", _compact(row.metadata)),
        ("progress", _compact(row.progress) if row.progress is not None else "-"),
    ]
    width = max(len(name) for name, _ in fields) + 1
    lines = [f"{(name + ':').ljust(width)}  {cell(value, 10_000)}" for name, value in fields]
    lines.append(f"errors ({len(row.errors)}):" if row.errors else "errors: -")
    for n, entry in enumerate(row.errors, 1):
        extra = {k: v for k, v in entry.items() if k not in ("error", "attempt", "at")}
        head = f"  #{n} attempt {entry.get('attempt', '?')} at {entry.get('at', '?')}"
        lines.append(head + (f" {_compact(extra)}" if extra else ""))
        # Tracebacks keep their lines; other control characters are flattened.
        text = str(entry.get("error", "")).replace("\r", "")
        lines.extend(f"      {_CONTROL.sub(' ', part)}" for part in text.split("\n"))
    return "\n".join(lines)


def instances_table(instances: Sequence[RuntimeInstance]) -> str:
    """Live processes, one line each: who they are, what they serve, the specs they hold."""
    rows = [
        (
            i.instance_id,
            i.role,
            ", ".join(f"{q}={n}" for q, n in sorted(i.queues.items())) or "-",
            i.in_flight,
            "yes" if i.leader else "",
            "yes" if i.healthy else "NO",
            len(i.specs),
            when(i.last_seen_at),
        )
        for i in instances
    ]
    return table(
        ["INSTANCE", "ROLE", "QUEUES", "IN FLIGHT", "LEADER", "HEALTHY", "SPECS", "LAST SEEN"],
        rows,
    )


def _node(row: JobRow) -> str:
    """One job of a lineage tree: id, kind, state, and how its trigger enqueued it."""
    how = f"  <- {row.trigger.outcome} ({cell(row.trigger.spec, 40)})" if row.trigger else ""
    return f"{row.id} {cell(row.kind, 40)} [{row.state.value}]{how}"


def lineage_tree(lineage: Lineage) -> str:
    """``wai jobs lineage``: the trigger chain above, the job, its follow-ups as a tree."""
    lines: list[str] = []
    for depth, row in enumerate(reversed(lineage.ancestors)):
        lines.append("  " * depth + _node(row))
    top = len(lineage.ancestors)
    if lineage.job.trigger is not None and not lineage.ancestors:
        lines.append(f"(triggered by job {lineage.job.trigger.job_id}, no longer stored)")
    lines.append("  " * top + _node(lineage.job) + "   <= this job")
    children: dict[int, list[JobRow]] = {}
    for row in lineage.followups:
        assert row.trigger is not None  # a follow-up always names its trigger
        children.setdefault(row.trigger.job_id, []).append(row)
    owed: dict[int, list[OutboxEntry]] = {}
    for entry in lineage.owed:
        owed.setdefault(entry.job_id, []).append(entry)
    # An explicit stack, not recursion: a chain may be thousands of follow-ups deep. Each
    # item prints its job (the root is printed already), then its owed rows, then pushes its
    # follow-ups, last first, so they print in id order below it.
    stack: list[tuple[JobRow | None, int, int]] = [(None, lineage.job.id, top)]
    while stack:
        row, job_id, depth = stack.pop()
        if row is not None:
            lines.append("  " * depth + _node(row))
        for entry in owed.get(job_id, ()):
            error = f": {cell(entry.last_error, 60)}" if entry.last_error else ""
            lines.append(
                "  " * (depth + 1)
                + f"(owed: {entry.outcome} follow-ups, outbox row {entry.id}, {entry.state}, "
                + f"{entry.attempts} failed attempts{error})"
            )
        stack.extend((child, child.id, depth + 1) for child in reversed(children.get(job_id, [])))
    return "\n".join(lines)
