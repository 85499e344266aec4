"""assert_enqueued: what an outcome enqueued, with failure messages that show it."""

from __future__ import annotations

import json
from typing import Any, Protocol

from wai._codec import encode_args
from wai._job import JobRow
from wai._kinds import kind_of_type

__all__ = ["assert_enqueued"]


class _HasFollowups(Protocol):
    @property
    def followups(self) -> list[JobRow]: ...


def assert_enqueued(
    run: _HasFollowups,
    kind: type[Any] | str,
    *,
    count: int | None = None,
    args: Any = None,
) -> list[JobRow]:
    """Assert that ``run``'s outcome enqueued follow-ups of ``kind``; return them.

    ``run`` is a :class:`JobRun` (or a :class:`DrainedJob`); ``kind`` a kind name or
    an args type. With ``args`` (an args instance, or the dict the row stores) only
    the follow-ups with exactly those args count. With ``count`` exactly that many
    must match, else at least one (``count=0``: none). The :class:`AssertionError`
    lists every follow-up the outcome did enqueue.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this function
    name = kind_of_type(kind)
    matching = [row for row in run.followups if row.kind == name]
    wanted = f"{name!r}"
    if args is not None:
        expected = json.loads(encode_args(args))
        matching = [row for row in matching if row.args == expected]
        wanted = f"{name!r} with args {json.dumps(expected, sort_keys=True)}"
    if count is None:
        if matching:
            return matching
        problem = f"expected a follow-up job of kind {wanted}, found none"
    elif len(matching) == count:
        return matching
    else:
        jobs = "job" if count == 1 else "jobs"
        problem = f"expected {count} follow-up {jobs} of kind {wanted}, found {len(matching)}"
    raise AssertionError(f"{problem}.\n{_enqueued(run.followups)}")


def _enqueued(rows: list[JobRow]) -> str:
    if not rows:
        return "The outcome enqueued no follow-up jobs."
    lines = [f"The outcome enqueued {len(rows)} follow-up job{'s' if len(rows) > 1 else ''}:"]
    for row in rows:
        spec = f", spec {row.trigger.spec!r}" if row.trigger is not None else ""
        lines.append(
            f"  job {row.id} kind {row.kind!r} queue {row.queue!r} "
            f"args {json.dumps(row.args, sort_keys=True)}{spec}"
        )
    return "\n".join(lines)
