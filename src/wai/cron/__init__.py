"""Periodic (cron) schedules: expressions, models, queries and the clients' operations.

``client.periodic(name, expr, args, ...)`` registers a :class:`Periodic`. A
process that starts upserts its schedules by name into the ``cron_schedules``
table (never deleting one it lacks, never touching a pause); the maintenance
leader then fires them (:func:`fire_plan`, :class:`wai.maintenance.CronFirer`),
moving each schedule's cursor with a compare-and-set in the statement that
inserts its jobs.

``_expr`` parses cron expressions and computes fire times, ``_models`` holds the
schedules without I/O, ``_queries_async`` the Python of ``sql/queries/cron.sql``,
and ``_ops_async`` the operations the clients delegate to (``list_cron``,
``pause_cron``...); ``_queries`` and ``_ops`` are their generated sync twins.
"""

from __future__ import annotations

from wai.cron._expr import CronExpression, due_fires, parse_zone
from wai.cron._models import (
    CRON_METADATA_KEY,
    MissedFirePolicy,
    Periodic,
    Schedule,
    check_name,
    fire_plan,
)

__all__ = [
    "CRON_METADATA_KEY",
    "CronExpression",
    "MissedFirePolicy",
    "Periodic",
    "Schedule",
    "check_name",
    "due_fires",
    "fire_plan",
    "parse_zone",
]
