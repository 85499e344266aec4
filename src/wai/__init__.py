"""wai: a PostgreSQL-native background job queue with transactional follow-up jobs."""

from __future__ import annotations

from wai import bridge
from wai._client_base import Transaction
from wai._client_base_async import AsyncTransaction
from wai.client import AsyncClient, Client
from wai.context import Job
from wai.errors import (
    CallbackNotFound,
    DatabaseError,
    FollowUpError,
    JobNotFound,
    SchemaNotMigrated,
    SerializationError,
    TerminalError,
    UniqueConflict,
    UnknownJobKind,
    ValidationError,
    WaiError,
)
from wai.inserts import EnqueueRequest
from wai.job import JobRow, JobState, Trigger
from wai.queues import QueueConfig
from wai.results import CallbackToken, Cancel, RetryAfter, Snooze, WaitForCallback
from wai.unique import UniqueOpts

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "AsyncTransaction",
    "CallbackNotFound",
    "CallbackToken",
    "Cancel",
    "Client",
    "DatabaseError",
    "EnqueueRequest",
    "FollowUpError",
    "Job",
    "JobNotFound",
    "JobRow",
    "JobState",
    "QueueConfig",
    "RetryAfter",
    "SchemaNotMigrated",
    "SerializationError",
    "Snooze",
    "TerminalError",
    "Transaction",
    "Trigger",
    "UniqueConflict",
    "UniqueOpts",
    "UnknownJobKind",
    "ValidationError",
    "WaiError",
    "WaitForCallback",
    "__version__",
    "bridge",
]
