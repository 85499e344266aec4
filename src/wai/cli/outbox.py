"""``wai outbox ...``: list, count, retry and discard follow-up outbox rows.

One small function per subcommand over the client's outbox methods
(:mod:`wai.outbox`). An outbox row holds the follow-ups of one transition that
a sweeper has not dispatched yet; ``failed`` rows gave up after
``outbox_max_attempts`` failed dispatches and wait for an operator.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from wai.cli import _tables
from wai.cli._common import admin_client, err, fail, group, json_option, limit, subparser
from wai.outbox import OUTBOX_STATES, OutboxEntry, OutboxStats

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands", "stats_line"]


def add_commands(sub: SubParsers) -> None:
    """Add the ``outbox`` command group to ``wai``'s subcommands."""
    outbox = group(sub, "outbox", "list, count, retry and discard follow-up outbox rows")

    p = subparser(
        outbox, "list", "outbox rows, oldest first, with attempts and last error", _cmd_list
    )
    p.add_argument("--state", choices=OUTBOX_STATES, help="only rows in STATE")
    p.add_argument("--kind", metavar="KIND", help="only rows of this trigger kind")
    p.add_argument(
        "--limit", type=limit, default=100, metavar="N", help="at most N rows (default 100)"
    )
    p.add_argument("--after-id", type=int, metavar="ID", help="only rows after ID (the next page)")
    json_option(p)

    p = subparser(outbox, "stats", "how many rows are pending and how many failed", _cmd_stats)
    json_option(p)

    p = subparser(
        outbox,
        "retry",
        "make row ID due now with a fresh attempt budget (a failed row becomes pending)",
        _cmd_retry,
    )
    p.add_argument("id", type=int, metavar="ID", help="the outbox row id")
    json_option(p)

    p = subparser(
        outbox,
        "discard",
        "delete row ID: its follow-ups are never inserted",
        _cmd_discard,
    )
    p.add_argument("id", type=int, metavar="ID", help="the outbox row id")
    json_option(p)


def stats_line(stats: OutboxStats) -> str:
    """``outbox: 3 pending (oldest ...), 1 failed``, for the end of a status table."""
    oldest = f" (oldest {_tables.when(stats.oldest_pending_at)})" if stats.oldest_pending_at else ""
    return f"outbox: {stats.pending} pending{oldest}, {stats.failed} failed"


def _entries_table(entries: list[OutboxEntry]) -> str:
    return _tables.table(
        ["ID", "STATE", "JOB", "KIND", "OUTCOME", "ATTEMPTS", "NEXT ATTEMPT", "CREATED", "ERROR"],
        (
            [
                e.id,
                e.state,
                e.job_id,
                e.kind,
                e.outcome,
                e.attempts,
                "-" if e.state == "failed" else _tables.when(e.next_attempt_at),
                _tables.when(e.created_at),
                e.last_error or "",
            ]
            for e in entries
        ),
    )


def _entry_json(entry: OutboxEntry) -> dict[str, object]:
    return {**_tables.jsonable(entry), "state": entry.state}


def _cmd_list(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    entries = admin_client(args, stack).outbox_list(
        state=args.state, kind=args.kind, limit=args.limit, after_id=args.after_id
    )
    if args.json:
        print(_tables.json_text([_entry_json(e) for e in entries]))
        return 0
    print(_entries_table(entries))
    if len(entries) == args.limit:
        err(f"more rows may follow: add --after-id {entries[-1].id}", "")
    return 0


def _cmd_stats(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    stats = admin_client(args, stack).outbox_stats()
    print(_tables.json_text(stats) if args.json else stats_line(stats))
    return 0


def _cmd_retry(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    entry = admin_client(args, stack).outbox_retry(args.id)
    if args.json:
        print(_tables.json_text(_entry_json(entry)))
    else:
        print(
            f"outbox row {entry.id} (job {entry.job_id}, {entry.outcome}) retried: pending, "
            "due now, attempts reset to 0; a process holding its specs dispatches it"
        )
    return 0


def _cmd_discard(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    if not admin_client(args, stack).outbox_discard(args.id):
        return fail(f"no outbox row with id {args.id}: dispatched, discarded, or never there")
    if args.json:
        print(_tables.json_text({"discarded": 1}))
    else:
        print(f"outbox row {args.id} discarded: its follow-ups will not be inserted")
    return 0
