"""The exceptions wai raises.

Every exception subclasses :class:`WaiError`::

    WaiError
    ├── ValidationError        bad input to an API call; nothing was written
    │   ├── SerializationError args or metadata that cannot be stored as JSON
    │   └── NoDatabaseURL      a client got no URL and none is set in the environment
    ├── UniqueConflict         an insert collided with a unique job
    ├── SchemaNotMigrated      the database schema is missing or behind
    ├── UnknownJobKind         no task is registered for a kind
    ├── JobNotFound            no job with that id
    ├── InvalidStateError      an operator action does not apply to the job's state
    ├── CallbackNotFound       unknown, stale or already-resolved callback id
    ├── ScheduleNotFound       no periodic schedule with that name
    ├── OutboxRowNotFound      no follow-up outbox row with that id
    ├── StaleAttempt           this attempt no longer owns its job (fenced by its run lease)
    ├── FollowUpError          a follow-up spec failed
    ├── DatabaseError          PostgreSQL failed in a way wai cannot hide
    └── TerminalError          raised by a handler: fail the job now, no retry
"""

from __future__ import annotations

__all__ = [
    "CallbackNotFound",
    "DatabaseError",
    "FollowUpError",
    "InvalidStateError",
    "JobNotFound",
    "NoDatabaseURL",
    "OutboxRowNotFound",
    "ScheduleNotFound",
    "SchemaNotMigrated",
    "SerializationError",
    "StaleAttempt",
    "TerminalError",
    "UniqueConflict",
    "UnknownJobKind",
    "ValidationError",
    "WaiError",
]


class WaiError(Exception):
    """Base class of every error wai raises."""


class ValidationError(WaiError, ValueError):
    """An argument was rejected before anything was written to the database."""


class SerializationError(ValidationError):
    """Job args or metadata could not be encoded to (or decoded from) JSON."""


class NoDatabaseURL(ValidationError):
    """A client was built without a URL and neither WAI_DATABASE_URL nor DATABASE_URL is set."""


class UniqueConflict(WaiError):
    """An insert would duplicate a job that holds the same unique key.

    ``existing_id`` is the id of the job that holds the key, when known.
    """

    def __init__(self, message: str, *, existing_id: int | None = None) -> None:
        super().__init__(message)
        self.existing_id = existing_id


class SchemaNotMigrated(WaiError):
    """The wai schema is missing or older than this version of wai expects."""


class UnknownJobKind(WaiError):
    """No task is registered for the job's kind in this process."""


class JobNotFound(WaiError, LookupError):
    """No job exists with the given id."""


class InvalidStateError(WaiError):
    """An operator action does not apply to the job's current state.

    For example cancelling a job that already completed, or retrying one that is
    still running. ``state`` is the state the job was found in; nothing was changed.
    """

    def __init__(self, message: str, *, state: str | None = None) -> None:
        super().__init__(message)
        self.state = state


class CallbackNotFound(WaiError, LookupError):
    """The callback id is unknown, stale, or already resolved."""


class StaleAttempt(WaiError):
    """The attempt no longer owns its job: rescued, cancelled, resolved elsewhere or re-claimed.

    Raised inside a handler by ``job.register_callback`` and ``job.wait_for_callback``;
    whatever the attempt returns afterwards is discarded by the run-lease guard.
    """


class FollowUpError(WaiError):
    """A follow-up spec raised, returned the wrong type, or its insert failed."""


class DatabaseError(WaiError):
    """PostgreSQL reported an error that wai could not handle."""


class TerminalError(WaiError):
    """Raise from a handler to fail the job now, without further retries."""


class ScheduleNotFound(WaiError):
    """No periodic (cron) schedule has that name in the database."""


class OutboxRowNotFound(WaiError, LookupError):
    """No follow-up outbox row has that id: it was dispatched, discarded, or never existed."""
