"""Operator actions without I/O: the queue statistics model and argument checks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final

from wai._flow import RateLimit, stored_rate_limit
from wai._job import JobState
from wai._storable import check_text
from wai._tally import EVENTS
from wai.errors import InvalidStateError, JobNotFound, ValidationError

__all__ = [
    "CANCELLABLE_STATES",
    "DRAINED_STATES",
    "EXACT_COUNT_LIMIT",
    "FINISHED_STATES",
    "LIVE_STATES",
    "MAX_SEARCH",
    "RETRYABLE_STATES",
    "TIME_BOUND_SLACK",
    "JobSearch",
    "QueueDepth",
    "QueueStats",
    "ThroughputMinute",
    "check_filter_id",
    "check_job_id",
    "check_time_range",
    "counts_finished_exactly",
    "like_pattern",
    "parse_search",
    "queue_stats",
    "rejected",
]

#: States :meth:`cancel` applies to: every non-terminal state.
CANCELLABLE_STATES = frozenset(s for s in JobState if not s.is_terminal)

#: States :meth:`retry` applies to.
RETRYABLE_STATES = frozenset({JobState.FAILED, JobState.CANCELLED, JobState.WAITING_EXTERNAL})

#: States :meth:`drain_queue` cancels: jobs waiting to run, not running ones.
DRAINED_STATES = frozenset(
    {JobState.AVAILABLE, JobState.SCHEDULED, JobState.RETRYABLE, JobState.WAITING_EXTERNAL}
)

_MAX_ID = 2**63 - 1

#: How far (seconds) a time bound of :meth:`list_jobs` is moved out before it becomes an
#: id bound. ``created_at`` is when the inserting transaction began, and ids are taken
#: when it inserts, so ids follow creation times only up to how long transactions stay
#: open before they insert a job. Rows within this margin of a bound are read and
#: checked against it; a transaction open longer than this across a bound is the one
#: case where jobs may be missed (see :meth:`wai.AsyncClient.list_jobs`).
TIME_BOUND_SLACK: Final = 5.0

#: The longest search text: no kind is longer (the jobs table holds kinds of 1-200
#: characters), and a longer text could only match a job id by being a number.
MAX_SEARCH: Final = 200

_DECIMAL = re.compile(r"#?([0-9]{1,19})")  # ASCII digits: str.isdigit also takes "١٢"
_LIKE_SPECIAL = re.compile(r"([\\%_])")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


#: States whose jobs are finished: their counts come from statistics on a large table.
FINISHED_STATES = tuple(s.value for s in JobState if s.is_terminal)

#: Up to this many rows in the jobs table (by the planner's estimate), queue stats count
#: finished jobs exactly; beyond it they estimate them, reading no finished row.
EXACT_COUNT_LIMIT = 50_000


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueStats:
    """A snapshot of one queue for operators.

    ``counts`` maps every :class:`wai.JobState` value to its number of jobs (0 when
    none). Counts of unfinished jobs (available, running, scheduled, retryable,
    waiting_external) are always exact: they read only the live jobs, through their
    partial indexes. Counts of finished jobs (completed, failed, cancelled) are exact
    while the jobs table is small (up to :data:`EXACT_COUNT_LIMIT` rows) and estimated
    beyond, from PostgreSQL's statistics of the table (those of its last ANALYZE, scaled
    to its size now), so that stats stay fast over millions of finished jobs; the
    states so estimated are listed in ``estimated``. An estimate can lag by whatever
    changed since that ANALYZE, and a queue with very few finished jobs in a large table
    may count 0 of them.

    ``oldest_available_lag`` is how many seconds the oldest ``available`` job has been
    due (``now - run_at``), 0.0 when no job is available: a growing lag means the
    queue's workers do not keep up (or the queue is paused).

    Flow control (see ``docs/flow-control.md``): ``rate_limit`` and
    ``global_concurrency`` are the queue's stored limits (None: none);
    ``rate_tokens`` is what its bucket holds now (a claim takes one per job; None
    without a rate limit), to compare ``counts["running"]`` with
    ``global_concurrency``. ``keys_running`` is how many ordering keys have an attempt
    running, and ``waiting_turn`` how many available jobs wait for an earlier job of
    their ordering key to finish; ``retry_holds_key`` says whether a job waiting for
    its retry keeps its key's later jobs waiting.
    """

    name: str
    paused: bool
    paused_at: datetime | None
    counts: dict[str, int]
    oldest_available_lag: float
    estimated: tuple[str, ...] = ()
    rate_limit: RateLimit | None = None
    rate_tokens: float | None = None
    global_concurrency: int | None = None
    retry_holds_key: bool = True
    keys_running: int = 0
    waiting_turn: int = 0
    kind_rate_limits: dict[str, RateLimit] = field(default_factory=dict[str, RateLimit])
    kind_tokens: dict[str, float] = field(default_factory=dict[str, float])

    @property
    def total(self) -> int:
        """Jobs of the queue in any state."""
        return sum(self.counts.values())

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> QueueStats:
        """Build the stats from a ``queue_live_counts`` record; missing states count 0."""
        found: dict[str, Any] = rec["counts"] or {}
        kinds: dict[str, dict[str, Any]] = rec.get("kind_limits") or {}
        return cls(
            name=rec["name"],
            paused=bool(rec["paused"]),
            paused_at=rec["paused_at"],
            counts={s.value: int(found.get(s.value, 0)) for s in JobState},
            oldest_available_lag=float(rec["oldest_available_lag"] or 0.0),
            rate_limit=stored_rate_limit(
                rec.get("rate_limit"), rec.get("rate_per"), rec.get("rate_burst")
            ),
            rate_tokens=None
            if rec.get("rate_tokens") is None
            else max(0.0, float(rec["rate_tokens"])),
            global_concurrency=rec.get("global_concurrency"),
            retry_holds_key=bool(rec.get("retry_holds_key", True)),
            keys_running=int(rec.get("keys_running") or 0),
            waiting_turn=int(rec.get("waiting_turn") or 0),
            kind_rate_limits={
                kind: RateLimit(int(v["limit"]), per=float(v["per"]), burst=int(v["burst"]))
                for kind, v in kinds.items()
            },
            kind_tokens={kind: max(0.0, float(v["tokens"])) for kind, v in kinds.items()},
        )


#: The states a queue's depth counts: the jobs not finished.
LIVE_STATES = tuple(s.value for s in JobState if not s.is_terminal)


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueDepth:
    """One sample of a queue's depth, as the maintenance leader recorded it at ``at``.

    ``counts`` maps every unfinished state (scheduled, available, running, retryable,
    waiting_external) to its exact number of jobs then; ``oldest_available_lag`` is the
    seconds the oldest available job had been due (0.0 when none was available). See
    :meth:`wai.AsyncClient.queue_depth_history`.
    """

    at: datetime
    queue: str
    counts: dict[str, int]
    oldest_available_lag: float

    @property
    def depth(self) -> int:
        """Jobs of the queue not finished at ``at``."""
        return sum(self.counts.values())

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> QueueDepth:
        """Build a sample from a ``queue_depth`` row; missing states count 0."""
        found: dict[str, Any] = rec["counts"] or {}
        return cls(
            at=rec["at"],
            queue=rec["queue"],
            counts={s: int(found.get(s, 0)) for s in LIVE_STATES},
            oldest_available_lag=float(rec["oldest_available_lag"] or 0.0),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ThroughputMinute:
    """What workers did in one minute: ``counts`` maps each counted event to how many.

    The events (every key present, 0 when none): ``completed``; ``retried`` (the
    attempt failed and the job will run again); ``failed`` (no attempt left, or a
    terminal error); ``cancelled`` (by its handler); ``snoozed``; ``parked`` (waiting
    for a callback); ``rescued`` (a crashed or overdue attempt recovered by the
    maintenance leader). See :meth:`wai.AsyncClient.throughput`.
    """

    minute: datetime
    counts: dict[str, int]

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> ThroughputMinute:
        """Build a minute from a ``throughput_history`` row; missing events count 0."""
        found: dict[str, Any] = rec["counts"] or {}
        return cls(minute=rec["minute"], counts={e: int(found.get(e, 0)) for e in EVENTS})


def counts_finished_exactly(table_rows: float | None, have_estimates: bool) -> bool:
    """Whether queue stats should count finished jobs rather than estimate them.

    ``table_rows`` is the planner's estimate of the jobs table's size (None before its
    first VACUUM or ANALYZE), ``have_estimates`` whether (queue, state) statistics are
    visible. A small table is counted (cheap, and exact where tests and demos look); so
    is a table with no statistics yet, whatever its size, rather than showing nothing.
    """
    if table_rows is None or not have_estimates:
        return True
    return table_rows <= EXACT_COUNT_LIMIT


def queue_stats(
    live: list[dict[str, Any]],
    finished: list[dict[str, Any]],
    *,
    estimated: bool,
) -> list[QueueStats]:
    """Merge live counts per queue with finished counts (``name``, ``state``, ``n`` rows).

    Rows of other states in ``finished`` are ignored (estimates cover every state; the
    live counts are exact). A queue with only finished jobs gets a row too. Estimates are
    rounded to whole jobs. Sorted by queue name.
    """
    by_name = {rec["name"]: QueueStats.from_record(rec) for rec in live}
    marked = FINISHED_STATES if estimated else ()
    for rec in finished:
        if rec["state"] not in FINISHED_STATES:
            continue
        name = rec["name"]
        stats = by_name.get(name)
        if stats is None:
            stats = QueueStats(
                name=name,
                paused=False,
                paused_at=None,
                counts={s.value: 0 for s in JobState},
                oldest_available_lag=0.0,
            )
            by_name[name] = stats
        stats.counts[rec["state"]] += round(float(rec["n"]))
    return [replace(by_name[n], estimated=marked) for n in sorted(by_name)]


def check_job_id(job_id: object) -> int:
    """Return ``job_id`` if it is an int; raise JobNotFound when no job can have it.

    Ids are positive 64-bit integers, so ``0``, ``-1`` or ``2**70`` name no job;
    a non-integer (``"1"``, ``1.5``, ``True``) is a :class:`wai.ValidationError`.
    """
    if isinstance(job_id, bool) or not isinstance(job_id, int):
        raise ValidationError(f"a job id is an integer, got {job_id!r}")
    if not 1 <= job_id <= _MAX_ID:
        raise JobNotFound(f"no job with id {job_id}")
    return job_id


def check_filter_id(value: object, name: str) -> int | None:
    """``None``, or an id filter PostgreSQL can compare (a 64-bit integer).

    Anything else raises :class:`wai.ValidationError` naming the filter, before the
    query runs (``before_id=2**70`` is a mistake to report, not a page to fetch).
    """
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not -_MAX_ID - 1 <= value <= _MAX_ID
    ):
        raise ValidationError(f"{name} must be a 64-bit integer job id or None, got {value!r}")
    return value


def check_time_range(
    created_after: object, created_before: object
) -> tuple[datetime | None, datetime | None]:
    """The time bounds of a job listing, checked: timezone-aware datetimes or None.

    A naive datetime is ambiguous (whose local time?) and raises
    :class:`wai.ValidationError`, as does an empty range (``created_after`` not
    before ``created_before``).
    """
    for name, value in (("created_after", created_after), ("created_before", created_before)):
        if value is None:
            continue
        if not isinstance(value, datetime):
            raise ValidationError(
                f"{name} must be a datetime with a time zone, got {type(value).__name__}"
            )
        if value.utcoffset() is None:
            raise ValidationError(
                f"{name} must be timezone-aware (e.g. datetime.now(UTC)), got the naive {value}"
            )
    after: datetime | None = created_after  # pyright: ignore[reportAssignmentType]
    before: datetime | None = created_before  # pyright: ignore[reportAssignmentType]
    if after is not None and before is not None and after >= before:
        raise ValidationError(
            f"created_after ({after.isoformat()}) must be earlier than "
            f"created_before ({before.isoformat()})"
        )
    return after, before


@dataclass(frozen=True, slots=True)
class JobSearch:
    """What a job listing's ``search`` text matches.

    ``job_id`` is the job a decimal text names (None when it names none: not a
    number, or beyond the 64-bit ids); ``pattern`` is the ``LIKE`` pattern of a
    kind holding the text, ASCII letters lower-cased (the kind is compared
    lower-cased too).
    """

    job_id: int | None
    pattern: str


def like_pattern(text: str) -> str:
    r"""A ``LIKE`` pattern matching any text that holds ``text`` (ASCII case folded).

    ``%``, ``_`` and ``\`` (the default escape) are escaped, so every character of
    ``text`` matches itself: ``"50%_off"`` matches ``"x50%_offy"``, not ``"50% off"``.
    """
    escaped = _LIKE_SPECIAL.sub(r"\\\1", text.translate(_ASCII_LOWER))
    return f"%{escaped}%"


def parse_search(search: object) -> JobSearch | None:
    """The :class:`JobSearch` of a job listing's ``search`` text; None for no search.

    A decimal integer (ASCII digits, optionally after ``#`` as the UI shows ids)
    names a job id and is also looked for in kinds; any other text only in kinds,
    as it is (no space is stripped). Text that cannot be searched for (not a
    string, empty, longer than :data:`MAX_SEARCH`, a NUL byte, a lone surrogate)
    raises :class:`wai.ValidationError`.
    """
    if search is None:
        return None
    if not isinstance(search, str):
        raise ValidationError(f"search must be a string, got {type(search).__name__}")
    if not 1 <= len(search) <= MAX_SEARCH:
        raise ValidationError(f"search must be 1 to {MAX_SEARCH} characters, got {len(search)}")
    check_text(search, "search")
    number = _DECIMAL.fullmatch(search)
    job_id = int(number.group(1)) if number is not None else None
    if job_id is not None and not 1 <= job_id <= _MAX_ID:
        job_id = None
    # "#12" names job 12; kinds are searched for "12" (no kind wai accepts holds "#")
    return JobSearch(job_id=job_id, pattern=like_pattern(number.group(1) if number else search))


def rejected(
    action: str, job_id: int, state: str, allowed: frozenset[JobState]
) -> InvalidStateError:
    """The :class:`wai.InvalidStateError` for ``action`` on a job found in ``state``."""
    order = [s.value for s in JobState if s in allowed]
    which = f"{', '.join(order[:-1])} or {order[-1]}" if len(order) > 1 else order[0]
    return InvalidStateError(
        f"cannot {action} job {job_id}: it is {state}; {action} applies to {which} jobs",
        state=state,
    )
