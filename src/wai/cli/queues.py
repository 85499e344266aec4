"""``wai queues ...``: list queues with their counts, and pause, resume or drain one."""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from wai._inserts import validate_queue
from wai.cli import _tables
from wai.cli._common import admin_client, confirm, err, group, json_option, subparser, yes_option
from wai.cli.outbox import stats_line

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands"]


def add_commands(sub: SubParsers) -> None:
    """Add the ``queues`` command group to ``wai``'s subcommands."""
    queues = group(sub, "queues", "list, pause, resume and drain queues")
    p = subparser(queues, "list", "counts by state, pause flag and lag per queue", _cmd_list)
    json_option(p)
    for name, text in (
        ("pause", "stop workers claiming from queue NAME (inserts still land)"),
        ("resume", "let workers claim from queue NAME again"),
        ("drain", "cancel every job of queue NAME that waits to run (not running ones)"),
    ):
        p = subparser(queues, name, text, _cmd_action)
        p.add_argument("name", metavar="NAME", help="the queue")
        p.set_defaults(action=name)
        if name == "drain":
            yes_option(p)


def _cmd_list(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    client = admin_client(args, stack)
    stats = client.queue_stats()
    if args.json:
        print(_tables.json_text(stats))
        return 0
    print(_tables.queues_table(stats))
    outbox = client.outbox_stats()
    if outbox.pending or outbox.failed:
        print(f"\n{stats_line(outbox)} (see wai outbox list)")
    return 0


def _cmd_action(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    client = admin_client(args, stack)
    name: str = args.name
    if args.action == "pause":
        client.pause_queue(name)
        print(f"queue {name!r} paused: workers claim nothing from it until it is resumed")
    elif args.action == "resume":
        client.resume_queue(name)
        print(f"queue {name!r} resumed")
    else:
        validate_queue(name)  # a bad name is refused before anyone is asked
        if not confirm(
            f"drain queue {name!r} (cancel every job of it that waits to run)", yes=args.yes
        ):
            err("aborted: nothing cancelled", "")
            return 1
        drained = client.drain_queue(name)
        print(f"queue {name!r} drained: {drained} job{'' if drained == 1 else 's'} cancelled")
    return 0
