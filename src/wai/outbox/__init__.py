"""The follow-up outbox: its models, its queries and the clients' operations on it.

Transitions made where user closures must not or cannot run — maintenance
rescue, and callback resolutions or admin cancels by a process without the
registry — leave a row in the ``outbox`` table; a sweeper in a process holding
the follow-up specs dispatches it (inserts the follow-ups, deletes the row; see
:class:`wai.maintenance.OutboxSweeper`).

A row is ``pending`` while sweepers try it: a failed dispatch records the error
and retries with backoff. After ``outbox_max_attempts`` failed dispatches (a
runtime setting, 10 by default) the row is ``failed``: sweepers leave it alone
until an operator retries it (:meth:`wai.AsyncClient.outbox_retry`) or
discards it (:meth:`wai.AsyncClient.outbox_discard`). Retention never deletes
either (see :class:`wai.maintenance.Cleaner`).

``_models`` holds the entries and counts without I/O, ``_queries_async`` the
Python of ``sql/queries/outbox.sql``, and ``_ops_async`` the operations the
clients delegate to (``outbox_list``, ``outbox_retry``...); ``_queries`` and
``_ops`` are their generated sync twins.
"""

from __future__ import annotations

from wai.outbox._models import OUTBOX_STATES, OutboxEntry, OutboxStats, check_outbox_state

__all__ = ["OUTBOX_STATES", "OutboxEntry", "OutboxStats", "check_outbox_state"]
