"""The dead-letter queue: its models, its queries and the clients' operations on it.

A queue with the dead-letter queue on (``wai.QueueConfig(dlq=True)`` or
``start(..., dlq=True)``) does not keep its failed jobs in the jobs table: the
transaction that fails a job also moves it to the ``dlq`` table, with one of
:data:`DLQ_REASONS`. Operators list, inspect, retry and purge entries there.

``_models`` holds what needs no I/O (entries, reasons, filters, paging cursors),
``_queries_async`` the Python of ``sql/queries/dlq.sql``, and ``_ops_async`` the
operations the clients delegate to (``list_dlq``, ``retry_from_dlq``...); the
``_queries`` and ``_ops`` modules are their generated sync twins.
"""

from __future__ import annotations

from wai.dlq._models import (
    DLQ_REASONS,
    DlqEntry,
    DlqFilter,
    check_reason,
    decode_cursor,
    encode_cursor,
    failure_reason,
)

__all__ = [
    "DLQ_REASONS",
    "DlqEntry",
    "DlqFilter",
    "check_reason",
    "decode_cursor",
    "encode_cursor",
    "failure_reason",
]
