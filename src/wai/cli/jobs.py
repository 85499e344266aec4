"""``wai jobs ...``: list, show, retry and cancel jobs, and show a job's lineage.

One small function per subcommand over the client's operator methods
(:mod:`wai._admin`).
"""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from wai._job import JobState
from wai.cli import _tables
from wai.cli._common import (
    admin_client,
    err,
    group,
    int_in,
    json_option,
    limit,
    moment,
    subparser,
)

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands"]


def add_commands(sub: SubParsers) -> None:
    """Add the ``jobs`` command group to ``wai``'s subcommands."""
    jobs = group(sub, "jobs", "list, show, retry and cancel jobs")
    p = subparser(jobs, "list", "list jobs, newest first", _cmd_list)
    p.add_argument("--state", choices=[s.value for s in JobState], help="only jobs in STATE")
    p.add_argument("--kind", metavar="KIND", help="only jobs of this kind")
    p.add_argument("--queue", metavar="QUEUE", help="only jobs of this queue")
    p.add_argument("--tag", metavar="TAG", help="only jobs carrying this tag")
    p.add_argument(
        "--search",
        metavar="TEXT",
        help="only jobs whose kind holds TEXT (any case, %% and _ literal); "
        "a number also finds the job with that id",
    )
    p.add_argument(
        "--created-after",
        type=moment,
        metavar="TIME",
        help="only jobs created at or after TIME: ISO 8601 with a UTC offset "
        "(2026-05-01T12:00:00Z), or a duration ago (30s, 15m, 2h, 7d)",
    )
    p.add_argument(
        "--created-before",
        type=moment,
        metavar="TIME",
        help="only jobs created before TIME (as --created-after)",
    )
    p.add_argument(
        "--limit", type=limit, default=100, metavar="N", help="at most N jobs (default 100)"
    )
    p.add_argument(
        "--before-id", type=int, metavar="ID", help="only jobs older than ID (the next page)"
    )
    json_option(p)
    p = subparser(jobs, "show", "every field of one job, its errors and progress", _cmd_show)
    p.add_argument("id", type=int, metavar="ID", help="the job id")
    json_option(p)
    p = subparser(
        jobs,
        "lineage",
        "a job's follow-up chain: its triggers up, its follow-ups down",
        _cmd_lineage,
    )
    p.add_argument("id", type=int, metavar="ID", help="the job id")
    p.add_argument(
        "--limit",
        type=int_in(1, 10_000, "a number of follow-ups from 1 to 10000"),
        default=500,
        metavar="N",
        help="at most N follow-ups (default 500)",
    )
    json_option(p)
    p = subparser(jobs, "retry", "run a failed or cancelled job again now", _cmd_retry)
    p.add_argument("id", type=int, metavar="ID", help="the job id")
    json_option(p)
    p = subparser(jobs, "cancel", "cancel a job that has not finished", _cmd_cancel)
    p.add_argument("id", type=int, metavar="ID", help="the job id")
    json_option(p)


def _cmd_list(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    client = admin_client(args, stack)
    rows = client.list_jobs(
        state=args.state,
        kind=args.kind,
        queue=args.queue,
        tag=args.tag,
        search=args.search,
        created_after=args.created_after,
        created_before=args.created_before,
        limit=args.limit,
        before_id=args.before_id,
    )
    if args.json:
        print(_tables.json_text(rows))
        return 0
    print(_tables.jobs_table(rows))
    if len(rows) == args.limit:
        err(f"more jobs may follow: add --before-id {rows[-1].id}", "")
    return 0


def _cmd_show(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    row = admin_client(args, stack).get_job(args.id)
    print(_tables.json_text(row) if args.json else _tables.job_detail(row))
    return 0


def _cmd_lineage(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    lineage = admin_client(args, stack).lineage(args.id, limit=args.limit)
    print(_tables.json_text(lineage) if args.json else _tables.lineage_tree(lineage))
    if lineage.truncated and not args.json:
        err(f"more follow-ups than {args.limit}: add --limit N to see more", "")
    return 0


def _cmd_retry(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    row = admin_client(args, stack).retry(args.id)
    if args.json:
        print(_tables.json_text(row))
    else:
        print(
            f"job {row.id} retried: available now on queue {row.queue!r}, "
            f"attempt {row.attempt + 1} of {row.max_attempts} next"
        )
    return 0


def _cmd_cancel(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    row = admin_client(args, stack).cancel(args.id)
    print(_tables.json_text(row) if args.json else f"job {row.id} cancelled")
    return 0
