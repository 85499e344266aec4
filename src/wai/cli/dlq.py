"""``wai dlq ...``: list, inspect, retry, purge and move dead-lettered jobs.

One small function per subcommand over the client's dead-letter methods
(:mod:`wai.dlq`). ``retry`` and ``purge`` act on one job (``ID``) or in bulk
(``--all`` or filters); bulk actions count their entries first, draw a
:class:`~wai.cli._common.ProgressBar` on stderr and end with a summary.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
from typing import TYPE_CHECKING, Any

from wai._job import JobState
from wai.cli import _tables
from wai.cli._common import (
    ProgressBar,
    UsageError,
    admin_client,
    confirm,
    err,
    group,
    int_in,
    json_option,
    limit,
    plural,
    subparser,
    timestamp,
    yes_option,
)
from wai.dlq import DlqEntry

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands"]

_FILTERS = ("queue", "kind", "tag", "reason")

_priority = int_in(1, 4, "a priority")
_batch_size = int_in(1, 10_000, "an integer")


def add_commands(sub: SubParsers) -> None:
    """Add the ``dlq`` command group to ``wai``'s subcommands."""
    dlq = group(sub, "dlq", "list, inspect, retry, purge and move dead-lettered jobs")

    p = subparser(dlq, "list", "dead-lettered jobs, newest first", _cmd_list)
    _filter_options(p)
    p.add_argument(
        "--limit", type=limit, default=100, metavar="N", help="at most N entries (default 100)"
    )
    p.add_argument(
        "--before",
        metavar="CURSOR",
        help="only entries after CURSOR (the next page; printed when a page is full)",
    )
    json_option(p)

    p = subparser(dlq, "show", "one entry: reason, time, every job field and errors", _cmd_show)
    p.add_argument("id", type=int, metavar="ID", help="the job id")
    json_option(p)

    p = subparser(dlq, "depth", "dead-lettered jobs per queue, and the total", _cmd_depth)
    json_option(p)

    p = subparser(
        dlq,
        "retry",
        "put job ID, or every entry matching the filters (or --all), back to run",
        _cmd_retry,
    )
    p.add_argument("id", type=int, nargs="?", metavar="ID", help="the job id (one entry)")
    _filter_options(p, queue_help="bulk: only entries of this queue; with ID: move it there")
    p.add_argument("--all", action="store_true", help="bulk: every entry")
    p.add_argument("--to-queue", metavar="QUEUE", help="put the jobs on QUEUE instead")
    p.add_argument("--priority", type=_priority, metavar="P", help="give the jobs priority P (1-4)")
    p.add_argument(
        "--run-at",
        type=timestamp,
        metavar="ISO8601",
        help="run at this time (with a UTC offset) instead of now; a future time schedules",
    )
    _batch_option(p)
    json_option(p)

    p = subparser(
        dlq,
        "purge",
        "delete entry ID, or every entry matching the filters (or --all), for good",
        _cmd_purge,
    )
    p.add_argument("id", type=int, nargs="?", metavar="ID", help="the job id (one entry)")
    _filter_options(p)
    p.add_argument("--all", action="store_true", help="bulk: every entry")
    yes_option(p)
    _batch_option(p)
    json_option(p)

    p = subparser(dlq, "move", "move failed job ID to the dead-letter queue", _cmd_move)
    p.add_argument("id", type=int, metavar="ID", help="the job id (a failed job)")
    p.add_argument("--reason", default="manual", metavar="R", help="why it moves (default: manual)")
    json_option(p)


def _filter_options(parser: argparse.ArgumentParser, *, queue_help: str | None = None) -> None:
    parser.add_argument("--queue", metavar="QUEUE", help=queue_help or "only entries of QUEUE")
    parser.add_argument("--kind", metavar="KIND", help="only entries of this kind")
    parser.add_argument("--tag", metavar="TAG", help="only entries carrying this tag")
    parser.add_argument("--reason", metavar="R", help="only entries with this reason")


def _batch_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch-size",
        type=_batch_size,
        default=1000,
        metavar="N",
        help="bulk: entries per transaction (default 1000)",
    )


def _filters(args: argparse.Namespace) -> dict[str, str | None]:
    return {name: getattr(args, name) for name in _FILTERS}


def _described(filters: dict[str, str | None]) -> str:
    given = [f"{name} {value!r}" for name, value in filters.items() if value is not None]
    return ", ".join(given) if given else "every entry"


def _entry_json(entry: DlqEntry) -> dict[str, Any]:
    return {**_tables.jsonable(entry), "cursor": entry.cursor}


def _first_error_line(entry: DlqEntry) -> str:
    if not entry.job.errors:
        return ""
    text = str(entry.job.errors[-1].get("error", "")).strip()
    return text.splitlines()[0] if text else ""


def _entries_table(entries: list[DlqEntry]) -> str:
    return _tables.table(
        ["JOB ID", "KIND", "QUEUE", "REASON", "DLQ AT", "ATTEMPT", "LAST ERROR"],
        (
            [
                e.job.id,
                e.job.kind,
                e.job.queue,
                e.reason,
                _tables.when(e.dlq_at),
                f"{e.job.attempt}/{e.job.max_attempts}",
                _first_error_line(e),
            ]
            for e in entries
        ),
    )


# -- commands -----------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    entries = admin_client(args, stack).list_dlq(
        **_filters(args), limit=args.limit, before=args.before
    )
    if args.json:
        print(_tables.json_text([_entry_json(e) for e in entries]))
        return 0
    print(_entries_table(entries))
    if len(entries) == args.limit:
        err(f"more entries may follow: add --before {shlex.quote(entries[-1].cursor)}", "")
    return 0


def _cmd_show(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    entry = admin_client(args, stack).get_dlq_entry(args.id)
    if args.json:
        print(_tables.json_text(_entry_json(entry)))
        return 0
    head = [
        ("dlq reason", entry.reason),
        ("dlq at", _tables.when(entry.dlq_at)),
        ("dlq cursor", entry.cursor),
    ]
    width = max(len(name) for name, _ in head) + 1
    for name, value in head:
        print(f"{(name + ':').ljust(width)}  {_tables.cell(value, 10_000)}")
    print(_tables.job_detail(entry.job))
    return 0


def _cmd_depth(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    depths = admin_client(args, stack).dlq_depths()
    total = sum(depths.values())
    if args.json:
        print(_tables.json_text({"queues": depths, "total": total}))
        return 0
    rows: list[list[object]] = [[queue, n] for queue, n in sorted(depths.items())]
    rows.append(["(total)", total])
    print(_tables.table(["QUEUE", "DEPTH"], rows, right=1))
    return 0


def _cmd_retry(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    if args.id is not None:
        return _retry_one(args, stack)
    filters = _bulk_filters(args, "retry")
    client = admin_client(args, stack)
    total = client.count_dlq(**filters)
    if total == 0:
        return _nothing(args, "retried", filters)
    bar = ProgressBar("retrying", total)
    try:
        retried = client.bulk_retry_from_dlq(
            **filters,
            all=args.all,
            to_queue=args.to_queue,
            priority=args.priority,
            run_at=args.run_at,
            batch_size=args.batch_size,
            on_progress=bar.update,
        )
    finally:
        bar.finish()
    if args.json:
        print(_tables.json_text({"retried": retried}))
        return 0
    where = f" onto queue {args.to_queue!r}" if args.to_queue else ""
    summary = f"retried {retried} of {plural(total, 'matching entry', 'matching entries')}{where}"
    if retried > total:  # entries arrived after the count
        summary = f"retried {plural(retried, 'entry', 'entries')}{where}"
    elif retried < total:
        summary += (
            f"; {total - retried} not retried (a live job holds its unique key, "
            "or another process took the entry first)"
        )
    print(summary)
    return 0


def _retry_one(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    if args.all or any(getattr(args, name) is not None for name in ("kind", "tag", "reason")):
        raise UsageError(
            "dlq retry ID takes no filter and no --all (those are for a bulk retry without ID)"
        )
    if args.queue is not None and args.to_queue is not None and args.queue != args.to_queue:
        raise UsageError("dlq retry ID: give the target queue once (--queue or --to-queue)")
    row = admin_client(args, stack).retry_from_dlq(
        args.id,
        queue=args.queue if args.queue is not None else args.to_queue,
        priority=args.priority,
        run_at=args.run_at,
    )
    if args.json:
        print(_tables.json_text(row))
    else:
        when = (
            f"scheduled for {_tables.when(row.run_at)}"
            if row.state == JobState.SCHEDULED
            else "available now"
        )
        print(
            f"job {row.id} retried from the dead-letter queue: {when} on queue {row.queue!r}, "
            "attempt reset to 0"
        )
    return 0


def _cmd_purge(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    if args.id is not None:
        if args.all or any(v is not None for v in _filters(args).values()):
            raise UsageError(
                "dlq purge ID takes no filter and no --all (those are for a bulk purge without ID)"
            )
        admin_client(args, stack).purge_dlq_entry(args.id)
        if args.json:
            print(_tables.json_text({"purged": 1}))
        else:
            print(f"job {args.id} purged from the dead-letter queue")
        return 0
    filters = _bulk_filters(args, "purge")
    client = admin_client(args, stack)
    total = client.count_dlq(**filters)
    if total == 0:
        return _nothing(args, "purged", filters)
    action = f"purge {plural(total, 'dead-letter entry', 'dead-letter entries')} for good"
    if not args.all:
        action += f" ({_described(filters)})"
    if not confirm(action, yes=args.yes):
        err("aborted: nothing purged", "")
        return 1
    bar = ProgressBar("purging", total)
    try:
        purged = client.purge_dlq(
            **filters, all=args.all, batch_size=args.batch_size, on_progress=bar.update
        )
    finally:
        bar.finish()
    if args.json:
        print(_tables.json_text({"purged": purged}))
    else:
        print(f"purged {plural(purged, 'dead-letter entry', 'dead-letter entries')}")
    return 0


def _cmd_move(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    entry = admin_client(args, stack).move_to_dlq(args.id, args.reason)
    if args.json:
        print(_tables.json_text(_entry_json(entry)))
    else:
        print(f"job {entry.job.id} moved to the dead-letter queue (reason {entry.reason!r})")
    return 0


def _bulk_filters(args: argparse.Namespace, action: str) -> dict[str, str | None]:
    """The filters of a bulk action; refuses one with neither a filter nor ``--all``."""
    filters = _filters(args)
    given = any(v is not None for v in filters.values())
    if args.all and given:
        raise UsageError(f"dlq {action}: --all covers every entry; drop the filters or --all")
    if not args.all and not given:
        raise UsageError(
            f"dlq {action} needs a job ID, a filter (--queue, --kind, --tag, --reason) "
            f"or --all to {action} every dead-letter entry; nothing was done"
        )
    return filters


def _nothing(args: argparse.Namespace, done: str, filters: dict[str, str | None]) -> int:
    if args.json:
        print(_tables.json_text({done: 0}))
    else:
        none = (
            f"no dead-letter entry matches ({_described(filters)})"
            if any(v is not None for v in filters.values())
            else "the dead-letter queue is empty"
        )
        print(f"{none}: nothing {done}")
    return 0
