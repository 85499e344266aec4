"""Every error of the admin API, and the one place that maps wai's exceptions to HTTP statuses.

An error answers ``{"error": {"code": "...", "message": "..."}}``. Bad input is a
4xx and never reaches the database (wai's own checks raise
:class:`wai.ValidationError` before any write); only a bug or a failing follow-up
spec of the host application is a 500.
"""

from __future__ import annotations

import logging

import psycopg
from psycopg_pool import PoolTimeout

from wai.errors import (
    CallbackNotFound,
    DatabaseError,
    FollowUpError,
    InvalidStateError,
    JobNotFound,
    OutboxRowNotFound,
    ScheduleNotFound,
    SchemaNotMigrated,
    UniqueConflict,
    ValidationError,
)

__all__ = ["RETRY_AFTER", "ApiError", "api_error"]

logger = logging.getLogger("wai.web")

#: Seconds a 503 asks the caller to wait (``Retry-After``) before trying again.
RETRY_AFTER = 5


class ApiError(Exception):
    """An HTTP error answer: status, a stable machine ``code`` and a human ``message``."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}

    def body(self) -> dict[str, dict[str, str]]:
        """The JSON body of the answer."""
        return {"error": {"code": self.code, "message": self.message}}


def _unavailable(code: str, message: str) -> ApiError:
    return ApiError(503, code, message, {"Retry-After": str(RETRY_AFTER)})


def api_error(exc: Exception, where: str) -> ApiError:
    """The answer for ``exc``, raised while serving ``where`` (``"GET /api/v1/jobs"``).

    Database failures are logged with their detail and answered without it (a read
    needs no token, and the server's message names hosts); anything unexpected is
    logged with its traceback and answered as a bare 500.
    """
    match exc:
        case ApiError():
            return exc
        case JobNotFound() | ScheduleNotFound() | OutboxRowNotFound() | CallbackNotFound():
            return ApiError(404, "not_found", str(exc))
        case InvalidStateError():
            return ApiError(409, "invalid_state", str(exc))
        case UniqueConflict():
            return ApiError(409, "unique_conflict", str(exc))
        case ValidationError():
            return ApiError(400, "bad_request", str(exc))
        case SchemaNotMigrated():
            return _unavailable("schema_not_migrated", str(exc))
        case DatabaseError() | psycopg.Error() | PoolTimeout():
            logger.warning("%s: the database failed: %s", where, exc)
            return _unavailable(
                "database_unavailable", "the database is unavailable; try again later"
            )
        case FollowUpError():
            # The host application's follow-up spec failed: the action was rolled back.
            logger.warning("%s: rolled back: %s", where, exc)
            return ApiError(500, "followup_failed", f"nothing was changed: {exc}")
        case _:
            logger.error("%s: unexpected error", where, exc_info=exc)
            return ApiError(500, "internal_error", "internal error (details in the server log)")
