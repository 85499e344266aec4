"""External callbacks: models, queries, signing, the clients' operations, the HTTP ingress.

A handler registers a callback (``job.register_callback``) and parks or waits in
place; an outside system then resolves it by id, through a client
(``complete_external``, ``fail_external``, ``retry_external``,
``resume_external``, ``heartbeat_callback``, ``resolve_callback``) or through the
signed HTTP ingress.

``_models`` holds callback ids, timeouts, CEL expressions and resolution
decisions without I/O; ``_waiting`` what operators see of parked jobs and
callback timeouts (:class:`WaitingJob`, :class:`CallbackTimeout`, their
cursors); ``_queries_async`` the Python of
``sql/queries/callbacks.sql``; ``_ops_async`` the resolutions the clients
delegate to (``_queries`` and ``_ops`` are their generated sync twins);
:mod:`wai.callbacks.signing` signs and verifies HTTP callback requests (its
:func:`sign`, :func:`verify`, :func:`callback_url` and :class:`InvalidSignature`
are re-exported here); :mod:`wai.callbacks.ingress` is the Starlette app that
serves them (``pip install 'wai[http]'``). A worker's side of a callback, its
registration and in-place wait, is ``wai.worker._attempt_callbacks``.
"""

from __future__ import annotations

from wai.callbacks._models import (
    DEFAULT_ACTIONS,
    RETRY_ERROR,
    CallbackExpressions,
    CallbackResolution,
    Decision,
    Resolved,
    ResolveRequest,
    check_error,
    check_timeout,
    compile_expressions,
    decide_resolution,
    parse_callback_id,
    payload_json,
    resolution_outcome,
)
from wai.callbacks._waiting import CallbackTimeout, WaitingJob
from wai.callbacks.signing import InvalidSignature, callback_url, sign, verify

__all__ = [
    "DEFAULT_ACTIONS",
    "RETRY_ERROR",
    "CallbackExpressions",
    "CallbackResolution",
    "CallbackTimeout",
    "Decision",
    "InvalidSignature",
    "ResolveRequest",
    "Resolved",
    "WaitingJob",
    "callback_url",
    "check_error",
    "check_timeout",
    "compile_expressions",
    "decide_resolution",
    "parse_callback_id",
    "payload_json",
    "resolution_outcome",
    "sign",
    "verify",
]
