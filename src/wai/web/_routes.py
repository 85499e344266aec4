"""The one route table of the admin API: it drives the routing, the checks and the OpenAPI document.

Each :class:`~wai.web._endpoint.Endpoint` says its method and path, its
parameters with their types, its body, the shape of its answer, whether it
mutates and which client method it calls. :func:`wai.web._app.create_app` routes
and checks requests from :data:`ROUTES`, and :func:`wai.web._openapi.document`
describes the same tuple, so the document cannot drift from the routes.
"""

from __future__ import annotations

from typing import Any, Final

from wai._admin import MAX_SEARCH
from wai._job import JobState
from wai.outbox import OUTBOX_STATES
from wai.web import _api_callbacks as callbacks
from wai.web import _api_cron as cron
from wai.web import _api_dlq as dlq
from wai.web import _api_instances as instances
from wai.web import _api_jobs as jobs
from wai.web import _api_outbox as outbox
from wai.web import _api_queues as queues
from wai.web import _api_session as session
from wai.web._endpoint import Call, Endpoint
from wai.web._openapi import document
from wai.web._params import (
    DLQ_CURSOR,
    MAX_ID,
    WAITING_CURSOR,
    Boolean,
    Choice,
    Integer,
    Kind,
    Param,
    Queue,
    Secret,
    Text,
    Timestamp,
)
from wai.web._params_flow import COUNT, Nullable, RateLimitObject
from wai.web._schemas import ref
from wai.web._session import SIGN_IN_LIMIT, SIGN_IN_WINDOW

__all__ = ["ROUTES"]

# -- parameters ---------------------------------------------------------------------------

_ID = Integer(1, MAX_ID)
JOB_ID = Param(name="job_id", type=_ID, description="the job's id", required=True)
OUTBOX_ID = Param(name="outbox_id", type=_ID, description="the outbox row's id", required=True)
QUEUE_NAME = Param(name="name", type=Queue(), description="the queue's name", required=True)
KIND_NAME = Param(name="kind", type=Kind(), description="the job kind", required=True)
CRON_NAME = Param(
    name="name",
    type=Text(),
    description="the schedule's name (it may hold '/')",
    required=True,
    slashes=True,
)
LIMIT = Param(
    name="limit", type=Integer(1, 1000), default=100, description="the most items of the page"
)


def _text(name: str, description: str) -> Param:
    return Param(name=name, type=Text(), description=description)


def _queue(name: str, description: str) -> Param:
    return Param(name=name, type=Queue(), description=description)


_DLQ_FILTERS = (
    _queue("queue", "only entries of this queue"),
    _text("kind", "only entries of this kind"),
    _text("tag", "only entries carrying this tag"),
    _text("reason", "only entries with this reason (terminal_error, max_attempts_exhausted...)"),
)
_ALL = Param(
    name="all",
    type=Boolean(),
    default=False,
    description="act on every entry: required when no filter is given",
)
_PRIORITY = Param(name="priority", type=Integer(1, 4), description="give the job(s) this priority")
_RUN_AT = Param(
    name="run_at",
    type=Timestamp(),
    description="run at this time (with a UTC offset) instead of now; a future time schedules",
)

# -- response shapes ----------------------------------------------------------------------


def _object(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def _items(component: str, **more: dict[str, Any]) -> dict[str, Any]:
    return _object(items={"type": "array", "items": ref(component)}, **more)


_NULLABLE_ID: dict[str, Any] = {"type": ["integer", "null"]}
_INTEGER: dict[str, Any] = {"type": "integer"}
_SESSION = _object(
    read_only={"type": "boolean", "description": "no mutation is allowed, signed in or not"},
    signed_in={"type": "boolean"},
    csrf={
        "type": ["string", "null"],
        "description": "the session's CSRF token, for the `X-CSRF-Token` header of mutations",
    },
)
_SET_COOKIE = (
    "Sets the `wai_session` cookie (`HttpOnly; SameSite=Strict`, its `Path` the mount point, "
    "`Secure` over https)."
)


async def _openapi(call: Call) -> dict[str, Any]:
    """The OpenAPI document, its server being where the app is mounted."""
    return document(ROUTES, call.root_path)


# -- the table ----------------------------------------------------------------------------

#: Every operation of the API, in the order of the OpenAPI document.
ROUTES: Final[tuple[Endpoint, ...]] = (
    # jobs
    Endpoint(
        method="GET",
        path="/jobs",
        operation_id="listJobs",
        tag="jobs",
        summary="List jobs, newest first",
        description="Keyset pages: pass `next_before_id` as `before_id` for the next page; "
        "it is null on the last page. Filters that no index serves (`search`, `kind`, "
        "`queue`, `tag`), given without `trigger_job_id` or a state other than available, "
        "running and completed, are checked job by job: each page of such a listing then "
        f"looks through at most {jobs.SCAN_WINDOW:,} ids, so it may hold fewer than `limit` "
        "jobs, or none, while `next_before_id` is not null. Follow `next_before_id` until "
        "it is null to see every match. Time bounds become id bounds (ids follow creation "
        "times): a job is missed at a bound only when a transaction that inserted jobs "
        "stayed open more than 5 seconds across it (`created_at` is when the inserting "
        "transaction began).",
        calls="list_jobs",
        handler=jobs.list_jobs,
        query=(
            Param(
                name="state",
                type=Choice(tuple(s.value for s in JobState)),
                description="only jobs in this state",
            ),
            _text("kind", "only jobs of this kind"),
            _queue("queue", "only jobs of this queue"),
            _text("tag", "only jobs carrying this tag"),
            Param(
                name="trigger_job_id",
                type=_ID,
                description="only the follow-ups enqueued by this job's outcomes",
            ),
            Param(
                name="created_after",
                type=Timestamp(),
                description="only jobs created at or after this time (RFC 3339, with an offset)",
            ),
            Param(
                name="created_before",
                type=Timestamp(),
                description="only jobs created before this time (RFC 3339, with an offset)",
            ),
            Param(
                name="search",
                type=Text(MAX_SEARCH),
                description="only jobs whose kind holds this text (ASCII case ignored, `%` and "
                "`_` literal); a decimal number (or `#` and one) also matches that job id",
            ),
            Param(name="before_id", type=_ID, description="only jobs older than this id"),
            LIMIT,
        ),
        response=_items("Job", next_before_id=_NULLABLE_ID),
    ),
    Endpoint(
        method="GET",
        path="/jobs/{job_id}",
        operation_id="getJob",
        tag="jobs",
        summary="Show one job",
        description="A job that moved to the dead-letter queue is a 404 here whose message "
        "says so: see `GET /api/v1/dlq/{job_id}`.",
        calls="get_job",
        handler=jobs.get_job,
        path_params=(JOB_ID,),
        response=ref("Job"),
        errors=(404,),
    ),
    Endpoint(
        method="GET",
        path="/jobs/{job_id}/lineage",
        operation_id="getJobLineage",
        tag="jobs",
        summary="A job's follow-up chain, both ways",
        description="The jobs whose outcomes enqueued it (`ancestors`, nearest first), the "
        "follow-ups its outcomes enqueued and theirs (`followups`, breadth first, at most "
        "`limit`; `truncated` says when there were more; each names its parent in "
        "`trigger.job_id`), and the outbox rows of the job and its follow-ups (`owed`: "
        "follow-ups not enqueued yet, with their last error).",
        calls="lineage",
        handler=jobs.job_lineage,
        path_params=(JOB_ID,),
        query=(
            Param(
                name="limit",
                type=Integer(1, 10_000),
                default=500,
                description="the most follow-ups to return",
            ),
        ),
        response=ref("Lineage"),
        errors=(404,),
    ),
    Endpoint(
        method="POST",
        path="/jobs/{job_id}/cancel",
        operation_id="cancelJob",
        tag="jobs",
        summary="Cancel a job that has not finished",
        description="A running job's worker is told to stop; its result is fenced off. "
        "409 for a completed, failed or cancelled job.",
        calls="cancel",
        handler=jobs.cancel_job,
        path_params=(JOB_ID,),
        body=(),
        response=ref("Job"),
        mutates=True,
        errors=(404, 409),
    ),
    Endpoint(
        method="POST",
        path="/jobs/{job_id}/retry",
        operation_id="retryJob",
        tag="jobs",
        summary="Run a failed, cancelled or waiting job again now",
        description="409 for a job in any other state, or whose unique key a live job holds.",
        calls="retry",
        handler=jobs.retry_job,
        path_params=(JOB_ID,),
        body=(),
        response=ref("Job"),
        mutates=True,
        errors=(404, 409),
    ),
    # queues
    Endpoint(
        method="GET",
        path="/queues",
        operation_id="listQueues",
        tag="queues",
        summary="Every queue with its counts by state, pause and lag",
        calls="queue_stats",
        handler=queues.list_queues,
        response=_items("QueueStats"),
    ),
    Endpoint(
        method="POST",
        path="/queues/{name}/pause",
        operation_id="pauseQueue",
        tag="queues",
        summary="Stop workers claiming from a queue (inserts still succeed)",
        calls="pause_queue",
        handler=queues.pause_queue,
        path_params=(QUEUE_NAME,),
        body=(),
        response=_object(queue={"type": "string"}, paused={"type": "boolean"}),
        mutates=True,
    ),
    Endpoint(
        method="POST",
        path="/queues/{name}/resume",
        operation_id="resumeQueue",
        tag="queues",
        summary="Let workers claim from a paused queue again",
        calls="resume_queue",
        handler=queues.resume_queue,
        path_params=(QUEUE_NAME,),
        body=(),
        response=_object(queue={"type": "string"}, paused={"type": "boolean"}),
        mutates=True,
    ),
    Endpoint(
        method="POST",
        path="/queues/{name}/drain",
        operation_id="drainQueue",
        tag="queues",
        summary="Cancel every job of a queue that waits to run",
        description="Running attempts finish. Answers how many jobs were cancelled.",
        calls="drain_queue",
        handler=queues.drain_queue,
        path_params=(QUEUE_NAME,),
        body=(),
        response=_object(queue={"type": "string"}, cancelled=_INTEGER),
        mutates=True,
    ),
    Endpoint(
        method="PUT",
        path="/queues/{name}/limits",
        operation_id="setQueueLimits",
        tag="queues",
        summary="Set or lift a queue's rate limit and global concurrency",
        description="Replaces both limits, for every worker at once: each field is required, "
        "and `null` lifts that limit. `rate_limit` caps how many of the queue's jobs start "
        "every `per` seconds (a token bucket of `burst` tokens), `global_concurrency` how "
        "many of its attempts run at once, across all processes. A rate limit set again "
        "unchanged keeps its bucket's tokens. Answers the limits as stored (`burst` "
        "resolved); `GET /api/v1/queues` shows them with the bucket's tokens.",
        calls="set_queue_limits",
        handler=queues.set_queue_limits,
        path_params=(QUEUE_NAME,),
        body=(
            Param(
                name="rate_limit",
                type=Nullable(RateLimitObject()),
                description="the rate limit, or null for none",
                required=True,
            ),
            Param(
                name="global_concurrency",
                type=Nullable(COUNT),
                description="the most attempts running at once across all workers, or null "
                "for no limit",
                required=True,
            ),
        ),
        response=_object(
            queue={"type": "string"},
            rate_limit={"anyOf": [ref("RateLimit"), {"type": "null"}]},
            global_concurrency={"type": ["integer", "null"]},
        ),
        mutates=True,
    ),
    Endpoint(
        method="PUT",
        path="/queues/{name}/kinds/{kind}/limit",
        operation_id="setKindRateLimit",
        tag="queues",
        summary="Set or lift the rate limit of one kind within a queue",
        description="For every worker at once: at most `limit` jobs of the kind start in the "
        "queue every `per` seconds (a token bucket of `burst` tokens), across all processes, "
        "on top of the queue's own limits; jobs of other kinds are not held back by it. "
        "`rate_limit` is required, and `null` lifts the kind's limit. A rate limit set again "
        "unchanged keeps its bucket's tokens. Answers the limit as stored (`burst` resolved); "
        "`GET /api/v1/queues` shows it with the bucket's tokens (`kind_rate_limits`, "
        "`kind_tokens`).",
        calls="set_kind_rate_limit",
        handler=queues.set_kind_rate_limit,
        path_params=(QUEUE_NAME, KIND_NAME),
        body=(
            Param(
                name="rate_limit",
                type=Nullable(RateLimitObject()),
                description="the kind's rate limit, or null for none",
                required=True,
            ),
        ),
        response=_object(
            queue={"type": "string"},
            kind={"type": "string"},
            rate_limit={"anyOf": [ref("RateLimit"), {"type": "null"}]},
        ),
        mutates=True,
    ),
    Endpoint(
        method="GET",
        path="/stats/depth",
        operation_id="queueDepthHistory",
        tag="queues",
        summary="Every queue's depth and lag over the last minutes",
        description="The samples the maintenance leader records every `depth_interval` "
        "(15 s by default), oldest first: per queue, its unfinished jobs by state and the "
        "lag of its oldest available job. A queue absent from a sample had no unfinished "
        "job then. Empty when no process ran maintenance in that time.",
        calls="queue_depth_history",
        handler=queues.depth_history,
        query=(
            Param(
                name="minutes",
                type=Integer(1, 1440),
                default=60,
                description="how far back, in minutes",
            ),
            _queue("queue", "only this queue's samples"),
        ),
        response=_items("QueueDepth"),
    ),
    Endpoint(
        method="GET",
        path="/stats/throughput",
        operation_id="throughput",
        tag="queues",
        summary="What workers did per minute: completed, retried, failed...",
        description="One item per minute of the window, the current one included, oldest "
        "first; `counts` has every event (completed, retried, failed, cancelled, snoozed, "
        "parked, rescued), 0 where none. Workers write their counts every "
        "`throughput_interval` (5 s by default).",
        calls="throughput",
        handler=queues.throughput,
        query=(
            Param(
                name="minutes",
                type=Integer(1, 1440),
                default=60,
                description="how many minutes, the current one included",
            ),
            _queue("queue", "only this queue's counts"),
            _text("kind", "only this kind's counts"),
        ),
        response=_items("ThroughputMinute"),
    ),
    # dead-letter queue
    Endpoint(
        method="GET",
        path="/dlq",
        operation_id="listDlq",
        tag="dlq",
        summary="List dead-lettered jobs, newest first",
        description="Cursor pages: pass `next_before` as `before` for the next page; it is "
        "null on the last page.",
        calls="list_dlq",
        handler=dlq.list_dlq,
        query=(
            *_DLQ_FILTERS,
            Param(name="before", type=DLQ_CURSOR, description="an entry's `cursor`"),
            LIMIT,
        ),
        response=_items("DlqEntry", next_before={"type": ["string", "null"]}),
    ),
    # before /dlq/{job_id}, which would take 'stats' for an id
    Endpoint(
        method="GET",
        path="/dlq/stats",
        operation_id="dlqStats",
        tag="dlq",
        summary="How many jobs are dead-lettered, in all and per queue",
        description="Queues without any entry are left out of `queues`.",
        calls="dlq_depths",
        handler=dlq.dlq_stats,
        response=_object(
            total=_INTEGER, queues={"type": "object", "additionalProperties": _INTEGER}
        ),
    ),
    Endpoint(
        method="GET",
        path="/dlq/{job_id}",
        operation_id="getDlqEntry",
        tag="dlq",
        summary="Show one dead-letter entry",
        calls="get_dlq_entry",
        handler=dlq.get_dlq_entry,
        path_params=(JOB_ID,),
        response=ref("DlqEntry"),
        errors=(404,),
    ),
    Endpoint(
        method="POST",
        path="/dlq/{job_id}/retry",
        operation_id="retryDlqEntry",
        tag="dlq",
        summary="Put one dead-lettered job back to run",
        description="It keeps its id, errors and lineage and gets a fresh retry budget. "
        "409 when a live job holds its unique key (the entry stays).",
        calls="retry_from_dlq",
        handler=dlq.retry_dlq_entry,
        path_params=(JOB_ID,),
        body=(_queue("queue", "move the job to this queue"), _PRIORITY, _RUN_AT),
        response=ref("Job"),
        mutates=True,
        errors=(404, 409),
    ),
    Endpoint(
        method="POST",
        path="/dlq/retry",
        operation_id="bulkRetryDlq",
        tag="dlq",
        summary="Retry every dead-lettered job matching the filters",
        description="Without a filter the request is refused (400) unless `all` is true. "
        "Answers how many were retried.",
        calls="bulk_retry_from_dlq",
        handler=dlq.bulk_retry_dlq,
        body=(
            *_DLQ_FILTERS,
            _ALL,
            _queue("to_queue", "put the jobs on this queue instead"),
            _PRIORITY,
            _RUN_AT,
        ),
        response=_object(retried=_INTEGER),
        mutates=True,
    ),
    Endpoint(
        method="DELETE",
        path="/dlq/{job_id}",
        operation_id="purgeDlqEntry",
        tag="dlq",
        summary="Delete one dead-letter entry for good",
        calls="purge_dlq_entry",
        handler=dlq.purge_dlq_entry,
        path_params=(JOB_ID,),
        body=(),
        response=_object(purged=_INTEGER),
        mutates=True,
        errors=(404,),
    ),
    Endpoint(
        method="POST",
        path="/dlq/purge",
        operation_id="bulkPurgeDlq",
        tag="dlq",
        summary="Delete every dead-letter entry matching the filters",
        description="Without a filter the request is refused (400) unless `all` is true. "
        "Answers how many were deleted.",
        calls="purge_dlq",
        handler=dlq.bulk_purge_dlq,
        body=(*_DLQ_FILTERS, _ALL),
        response=_object(purged=_INTEGER),
        mutates=True,
    ),
    # cron
    Endpoint(
        method="GET",
        path="/cron",
        operation_id="listCron",
        tag="cron",
        summary="Every stored schedule, with its next fire time",
        calls="list_cron",
        handler=cron.list_cron,
        response=_items("Schedule"),
    ),
    Endpoint(
        method="GET",
        path="/cron/{name}",
        operation_id="getCron",
        tag="cron",
        summary="Show one schedule",
        calls="get_cron",
        handler=cron.get_cron,
        path_params=(CRON_NAME,),
        response=ref("Schedule"),
        errors=(404,),
    ),
    Endpoint(
        method="POST",
        path="/cron/{name}/pause",
        operation_id="pauseCron",
        tag="cron",
        summary="Stop a schedule from firing until it is resumed",
        calls="pause_cron",
        handler=cron.pause_cron,
        path_params=(CRON_NAME,),
        body=(),
        response=ref("Schedule"),
        mutates=True,
        errors=(404,),
    ),
    Endpoint(
        method="POST",
        path="/cron/{name}/resume",
        operation_id="resumeCron",
        tag="cron",
        summary="Let a paused schedule fire again",
        description="The fire times it missed are owed by its missed-fire policy.",
        calls="resume_cron",
        handler=cron.resume_cron,
        path_params=(CRON_NAME,),
        body=(),
        response=ref("Schedule"),
        mutates=True,
        errors=(404,),
    ),
    Endpoint(
        method="POST",
        path="/cron/{name}/trigger",
        operation_id="triggerCron",
        tag="cron",
        summary="Enqueue one job of a schedule now, even while paused",
        calls="trigger_cron",
        handler=cron.trigger_cron,
        path_params=(CRON_NAME,),
        body=(),
        response=ref("Job"),
        mutates=True,
        errors=(404,),
    ),
    Endpoint(
        method="DELETE",
        path="/cron/{name}",
        operation_id="deleteCron",
        tag="cron",
        summary="Delete a stored schedule",
        description="A process that registers it stores it again when it starts.",
        calls="delete_cron",
        handler=cron.delete_cron,
        path_params=(CRON_NAME,),
        body=(),
        response=_object(name={"type": "string"}, deleted={"type": "boolean"}),
        mutates=True,
        errors=(404,),
    ),
    # callbacks
    Endpoint(
        method="GET",
        path="/callbacks",
        operation_id="listWaiting",
        tag="callbacks",
        summary="Jobs parked on a callback, soonest timeout first",
        description="Each with its callback id, its timeout and whether it is overdue "
        "(maintenance closes the attempt on its next rescue pass). Cursor pages: pass "
        "`next_after` as `after` for the next page; it is null on the last page.",
        calls="list_waiting",
        handler=callbacks.list_waiting,
        query=(
            _queue("queue", "only jobs of this queue"),
            _text("kind", "only jobs of this kind"),
            Param(name="after", type=WAITING_CURSOR, description="a waiting job's `cursor`"),
            LIMIT,
        ),
        response=_items("WaitingJob", next_after={"type": ["string", "null"]}),
    ),
    Endpoint(
        method="GET",
        path="/callbacks/timeouts",
        operation_id="listCallbackTimeouts",
        tag="callbacks",
        summary="Recent callback timeouts, newest first",
        description="Jobs whose last attempt maintenance closed because its callback timed "
        "out, as they are now: retryable (a retry is due at `run_at`), failed, or "
        "dead-lettered. Found among the 1,000 newest retryable jobs, failed jobs and "
        "dead-letter entries each; a job that ran again since is not listed.",
        calls="list_callback_timeouts",
        handler=callbacks.list_callback_timeouts,
        query=(
            _queue("queue", "only jobs of this queue"),
            _text("kind", "only jobs of this kind"),
            Param(
                name="limit",
                type=Integer(1, 1000),
                default=50,
                description="the most items to return",
            ),
        ),
        response=_items("CallbackTimeout"),
    ),
    # runtime instances
    Endpoint(
        method="GET",
        path="/instances",
        operation_id="listInstances",
        tag="instances",
        summary="The live worker and maintenance processes, and registry drift",
        calls="list_runtime_instances",
        handler=instances.list_instances,
        response=_items(
            "RuntimeInstance",
            drift={
                "type": "array",
                "items": _object(
                    kind={"type": "string"},
                    outcome={"type": "string"},
                    specs_by_instance={
                        "type": "object",
                        "additionalProperties": {"type": "array", "items": {"type": "string"}},
                    },
                ),
            },
        ),
    ),
    # follow-up outbox
    Endpoint(
        method="GET",
        path="/outbox",
        operation_id="listOutbox",
        tag="outbox",
        summary="Outbox rows, oldest first, with attempts and last error",
        description="Keyset pages: pass `next_after_id` as `after_id` for the next page; it "
        "is null on the last page.",
        calls="outbox_list",
        handler=outbox.list_outbox,
        query=(
            Param(name="state", type=Choice(OUTBOX_STATES), description="only rows in this state"),
            _text("kind", "only rows of this trigger kind"),
            Param(name="after_id", type=_ID, description="only rows after this id"),
            LIMIT,
        ),
        response=_items("OutboxEntry", next_after_id=_NULLABLE_ID),
    ),
    Endpoint(
        method="GET",
        path="/outbox/stats",
        operation_id="outboxStats",
        tag="outbox",
        summary="How many outbox rows are pending and how many failed",
        calls="outbox_stats",
        handler=outbox.outbox_stats,
        response=ref("OutboxStats"),
    ),
    Endpoint(
        method="POST",
        path="/outbox/{outbox_id}/retry",
        operation_id="retryOutboxRow",
        tag="outbox",
        summary="Make an outbox row due now, with a fresh attempt budget",
        calls="outbox_retry",
        handler=outbox.retry_outbox_row,
        path_params=(OUTBOX_ID,),
        body=(),
        response=ref("OutboxEntry"),
        mutates=True,
        errors=(404,),
    ),
    Endpoint(
        method="DELETE",
        path="/outbox/{outbox_id}",
        operation_id="discardOutboxRow",
        tag="outbox",
        summary="Delete an outbox row: its follow-ups are never inserted",
        calls="outbox_discard",
        handler=outbox.discard_outbox_row,
        path_params=(OUTBOX_ID,),
        body=(),
        response=_object(discarded=_INTEGER),
        mutates=True,
        errors=(404,),
    ),
    # browser sessions
    Endpoint(
        method="GET",
        path="/session",
        operation_id="getSession",
        tag="session",
        summary="Whether the app is read-only and this browser signed in",
        description="`csrf` is the session's CSRF token while signed in, else null.",
        calls="(none)",
        handler=session.get_session,
        response=_SESSION,
    ),
    Endpoint(
        method="POST",
        path="/session",
        operation_id="signIn",
        tag="session",
        summary="Sign a browser in with the admin token",
        description=f"{_SET_COOKIE} A mutation sent with the cookie must carry the answer's "
        "`csrf` in `X-CSRF-Token`. 401 for a wrong token; 429 (`Retry-After`) after "
        f"{SIGN_IN_LIMIT} wrong tokens from one address within {SIGN_IN_WINDOW:.0f} seconds; "
        "403 while the app is read-only.",
        calls="(none)",
        handler=session.create_session,
        body=(Param(name="token", type=Secret(), description="the admin token", required=True),),
        response=_SESSION,
        errors=(401, 403, 429),
    ),
    Endpoint(
        method="DELETE",
        path="/session",
        operation_id="signOut",
        tag="session",
        summary="Sign a browser out",
        description="Forgets the session and clears its cookie.",
        calls="(none)",
        handler=session.delete_session,
        response=_SESSION,
    ),
    # the document itself
    Endpoint(
        method="GET",
        path="/openapi.json",
        operation_id="openapi",
        tag="meta",
        summary="This OpenAPI 3.1 document",
        description="Its server URL is where the app is mounted.",
        calls="(none)",
        handler=_openapi,
        response={"type": "object"},
    ),
)
