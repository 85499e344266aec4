"""Helpers for testing code that uses wai, on a real PostgreSQL database.

- :func:`run_job` inserts a job and runs it once, inline, through the worker's own
  executor and finalizer; :func:`run_existing` runs a job already inserted. Both return
  a :class:`JobRun`: the committed row, the outcome, its error and its follow-ups.
- :func:`drain` runs the client's worker runtime until its queues have nothing left to
  run, and returns a :class:`DrainReport` of every job it ran (:class:`DrainedJob`),
  or raises :class:`DrainTimeout`.
- :func:`assert_enqueued` checks the follow-ups of a run.
- The pytest fixtures ``wai_database_url``, ``wai_app`` and ``wai_client`` come with the
  ``wai`` pytest plugin (loaded automatically; see ``docs/testing.md``).

Only the async client runs jobs: pass a :class:`wai.AsyncClient`.
"""

from __future__ import annotations

from wai.testing._assertions import assert_enqueued
from wai.testing._drain import DrainedJob, DrainReport, DrainTimeout, drain
from wai.testing._run import JobRun, run_existing, run_job

__all__ = [
    "DrainReport",
    "DrainTimeout",
    "DrainedJob",
    "JobRun",
    "assert_enqueued",
    "drain",
    "run_existing",
    "run_job",
]
