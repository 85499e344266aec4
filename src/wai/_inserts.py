"""Turning insert calls into validated rows (pure, no I/O)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from wai._job import JobRow, JobState, Trigger
from wai._json import loads
from wai._kinds import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    dumps,
    encode_args,
    kind_and_defaults,
    validate_queue,
)
from wai._kinds import check_int as _check_int
from wai._slots import positional_constructor
from wai._storable import check_text
from wai._unique import UniqueOpts, unique_key
from wai.errors import ValidationError

__all__ = [
    "EnqueueRequest",
    "NewJob",
    "build_args_job",
    "build_job",
    "check_run_at",
    "inserted_row",
    "validate_queue",
    "with_metadata",
]

MAX_TAGS = 20


@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    """Args plus insert options, for ``insert_many`` and ``on_*_enqueue_with`` specs.

    An option left None takes the default the args type declares (``@wai.kind``), else
    the one its kind is registered with, else the global one (queue ``"default"``,
    priority 2, 25 attempts). Jobs of one queue that share an *ordering_key* run one at
    a time, in insert order (``docs/flow-control.md``).
    """

    args: Any
    kind: str | None = None
    queue: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    run_at: datetime | None = None
    tags: Iterable[str] = ()
    metadata: Mapping[str, Any] | None = None
    unique: UniqueOpts | None = None
    ordering_key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NewJob:
    """One validated row, ready for the insert statements."""

    kind: str
    queue: str
    args: str
    state: str
    priority: int
    max_attempts: int
    run_at: datetime | None
    tags: list[str]
    metadata: str
    unique_key: bytes | None = None
    unique_states: list[str] | None = None
    on_conflict: str = "raise"
    ordering_key: str | None = None
    trigger: tuple[int, int, str, str] | None = field(default=None)


#: The earliest and latest ``run_at`` accepted: Python's datetime range less a day, so
#: the stored time reads back in any session time zone (PostgreSQL itself stores more).
MIN_RUN_AT = datetime(1, 1, 2, tzinfo=UTC)
MAX_RUN_AT = datetime(9999, 12, 30, tzinfo=UTC)


def check_run_at(run_at: object, field: str = "run_at") -> datetime:
    """Return ``run_at`` if it is a timezone-aware datetime wai can store and read back."""
    if not isinstance(run_at, datetime):
        raise ValidationError(f"{field} must be a datetime, got {type(run_at).__name__}")
    if run_at.utcoffset() is None:
        raise ValidationError(
            f"{field} must be timezone-aware: use datetime.now(UTC) + timedelta(...)"
        )
    if not MIN_RUN_AT <= run_at <= MAX_RUN_AT:
        raise ValidationError(
            f"{field} must lie between {MIN_RUN_AT:%Y-%m-%d} and {MAX_RUN_AT:%Y-%m-%d} UTC, "
            f"got {run_at.isoformat()}"
        )
    return run_at


def _check_tags(tags: Iterable[str]) -> list[str]:
    if isinstance(tags, str):
        raise ValidationError("tags must be a list of strings, not one string")
    out = list(tags)
    if len(out) > MAX_TAGS:
        raise ValidationError(f"at most {MAX_TAGS} tags per job, got {len(out)}")
    for i, tag in enumerate(out):
        if not isinstance(tag, str) or not 1 <= len(tag) <= 255:
            raise ValidationError(f"invalid tag {tag!r} in tags: use 1-255 characters")
        check_text(tag, f"tags[{i}]")
    return out


def build_job(
    request: EnqueueRequest,
    *,
    default_queue: Callable[[str], str | None],
    default_max_attempts: Callable[[str], int | None] = lambda _kind: None,
    now: datetime | None = None,
    trigger: tuple[int, int, str, str] | None = None,
) -> NewJob:
    """Validate one insert and compute its row; raises ValidationError on bad input.

    An option the request leaves None takes what the args type declares for its kind
    (:func:`wai.kind`), else ``default_queue(kind)`` / ``default_max_attempts(kind)``
    (the inserting client's registry), else the global default. *trigger* is the
    lineage of a follow-up: (job id, run lease, outcome, spec name).
    """
    kind, declared = kind_and_defaults(request.args, request.kind)
    # `is None`, not `or`: an explicit "" or 0 is invalid, not a request for the default.
    queue = request.queue
    priority = request.priority
    max_attempts = request.max_attempts
    if declared is not None:
        if queue is None:
            queue = declared.queue
        if priority is None:
            priority = declared.priority
        if max_attempts is None:
            max_attempts = declared.max_attempts
    if queue is None:
        queue = default_queue(kind) or DEFAULT_QUEUE
    validate_queue(queue)
    if priority is None:
        priority = DEFAULT_PRIORITY
    _check_int("priority", priority, 1, 4)
    if max_attempts is None:
        max_attempts = default_max_attempts(kind) or DEFAULT_MAX_ATTEMPTS
    _check_int("max_attempts", max_attempts, 1, 1000)
    args_json = encode_args(request.args)
    metadata: Any = request.metadata
    if metadata is None:
        metadata_json = "{}"
    elif isinstance(metadata, Mapping):
        metadata_json = dumps(dict(cast(Mapping[str, Any], metadata)), "metadata")
    else:
        raise ValidationError(f"metadata must be a dict, got {type(metadata).__name__}")
    run_at = request.run_at
    if run_at is not None:
        check_run_at(run_at)
    if request.ordering_key is not None:
        check_text(request.ordering_key, "ordering_key")
    key: bytes | None = None
    states: list[str] | None = None
    on_conflict = "raise"
    if request.unique is not None:
        if not isinstance(request.unique, UniqueOpts):
            raise ValidationError("unique must be a wai.UniqueOpts")
        key = unique_key(
            request.unique,
            kind=kind,
            queue=queue,
            args_json=args_json,
            now=now or datetime.now(UTC),
        )
        states = request.unique.state_list()
        on_conflict = request.unique.on_conflict
    return _new_job(  # the fields in order
        kind,
        queue,
        args_json,
        JobState.SCHEDULED if run_at is not None else JobState.AVAILABLE,
        priority,
        max_attempts,
        run_at,
        _check_tags(request.tags),
        metadata_json,
        key,
        states,
        on_conflict,
        request.ordering_key,
        trigger,
    )


def build_args_job(
    args: Any,
    *,
    default_queue: Callable[[str], str | None],
    default_max_attempts: Callable[[str], int | None] = lambda _kind: None,
    trigger: tuple[int, int, str, str] | None = None,
) -> NewJob:
    """``build_job(EnqueueRequest(args), ...)``, every option at its default, for less.

    The usual insert of a batch or a follow-up spec: bare args, no request around
    them, so none of the options needs checking.
    """
    kind, declared = kind_and_defaults(args)
    priority = DEFAULT_PRIORITY
    if declared is None:
        queue = default_queue(kind) or DEFAULT_QUEUE
        max_attempts = default_max_attempts(kind) or DEFAULT_MAX_ATTEMPTS
    else:  # declared values are valid
        queue = declared.queue or default_queue(kind) or DEFAULT_QUEUE
        max_attempts = declared.max_attempts or default_max_attempts(kind) or DEFAULT_MAX_ATTEMPTS
        priority = declared.priority or DEFAULT_PRIORITY
    validate_queue(queue)
    _check_int("max_attempts", max_attempts, 1, 1000)
    return _new_job(  # the fields in order
        kind,
        queue,
        encode_args(args),
        JobState.AVAILABLE,
        priority,
        max_attempts,
        None,  # run_at
        [],  # tags
        "{}",  # metadata
        None,  # unique_key
        None,  # unique_states
        "raise",  # on_conflict
        None,  # ordering_key
        trigger,
    )


# build_job runs once per job of a batch; NewJob(...) would be twice as slow.
_new_job = positional_constructor(NewJob)


def with_metadata(job: NewJob, metadata: str) -> NewJob:
    """``job`` with its metadata replaced by ``metadata`` (JSON already checked)."""
    return _new_job(  # the fields in order
        job.kind,
        job.queue,
        job.args,
        job.state,
        job.priority,
        job.max_attempts,
        job.run_at,
        job.tags,
        metadata,
        job.unique_key,
        job.unique_states,
        job.on_conflict,
        job.ordering_key,
        job.trigger,
    )


_new_row = positional_constructor(JobRow)
_STATES: dict[str, JobState] = {s.value: s for s in JobState}


def inserted_row(job: NewJob, id_: int, run_at: datetime, created_at: datetime) -> JobRow:
    """The row that inserting ``job`` stored, from the values the server chose for it.

    Everything else is what the insert sent, as the server stores it: args and metadata
    decode from the JSON that was sent (jsonb keeps their values), the attempt count and
    run lease start at zero, and no attempt has touched the row yet.
    """
    trigger = job.trigger
    metadata = job.metadata
    return _new_row(  # the fields in order
        id_,
        job.kind,
        job.queue,
        loads(job.args),
        _STATES[job.state],
        job.priority,
        0,  # attempt
        job.max_attempts,
        run_at,
        None,  # attempted_at
        None,  # heartbeat_at
        None,  # deadline_at
        None,  # finalized_at
        created_at,
        (),  # errors
        {} if metadata == "{}" else loads(metadata),
        tuple(job.tags),
        job.unique_key,
        job.ordering_key,
        None,  # callback_id
        None,  # callback_timeout_at
        0,  # run_lease
        None,  # progress
        None
        if trigger is None
        else Trigger(job_id=trigger[0], run_lease=trigger[1], outcome=trigger[2], spec=trigger[3]),
        None,  # callback_result
    )
