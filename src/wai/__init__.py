"""wai: a PostgreSQL-native background job queue with transactional follow-up jobs."""

from __future__ import annotations

from wai import bridge, events, metrics
from wai._admin import QueueDepth, QueueStats, ThroughputMinute
from wai._client_base import Transaction
from wai._client_base_async import AsyncTransaction
from wai._context import Job
from wai._flow import RateLimit
from wai._followups import RescueReason
from wai._health import Health, RuntimeHealth
from wai._inserts import EnqueueRequest
from wai._instances import RuntimeInstance
from wai._job import JobRow, JobState, Trigger
from wai._kinds import KindDefaults, kind
from wai._lineage import Lineage
from wai._logging import JsonFormatter
from wai._queues import QueueConfig
from wai._results import CallbackToken, Cancel, RetryAfter, Snooze, WaitForCallback
from wai._unique import UniqueOpts
from wai._version import __version__
from wai.callbacks import CallbackResolution, CallbackTimeout, WaitingJob
from wai.client import AsyncClient, Client
from wai.cron import Schedule
from wai.dlq import DlqEntry
from wai.errors import (
    CallbackNotFound,
    DatabaseError,
    FollowUpError,
    InvalidStateError,
    JobNotFound,
    NoDatabaseURL,
    OutboxRowNotFound,
    ScheduleNotFound,
    SchemaNotMigrated,
    SerializationError,
    StaleAttempt,
    TerminalError,
    UniqueConflict,
    UnknownJobKind,
    ValidationError,
    WaiError,
)
from wai.outbox import OutboxEntry, OutboxStats

__all__ = [
    "AsyncClient",
    "AsyncTransaction",
    "CallbackNotFound",
    "CallbackResolution",
    "CallbackTimeout",
    "CallbackToken",
    "Cancel",
    "Client",
    "DatabaseError",
    "DlqEntry",
    "EnqueueRequest",
    "FollowUpError",
    "Health",
    "InvalidStateError",
    "Job",
    "JobNotFound",
    "JobRow",
    "JobState",
    "JsonFormatter",
    "KindDefaults",
    "Lineage",
    "NoDatabaseURL",
    "OutboxEntry",
    "OutboxRowNotFound",
    "OutboxStats",
    "QueueConfig",
    "QueueDepth",
    "QueueStats",
    "RateLimit",
    "RescueReason",
    "RetryAfter",
    "RuntimeHealth",
    "RuntimeInstance",
    "Schedule",
    "ScheduleNotFound",
    "SchemaNotMigrated",
    "SerializationError",
    "Snooze",
    "StaleAttempt",
    "TerminalError",
    "ThroughputMinute",
    "Transaction",
    "Trigger",
    "UniqueConflict",
    "UniqueOpts",
    "UnknownJobKind",
    "ValidationError",
    "WaiError",
    "WaitForCallback",
    "WaitingJob",
    "__version__",
    "bridge",
    "events",
    "kind",
    "metrics",
]
