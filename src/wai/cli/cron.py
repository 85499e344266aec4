"""``wai cron ...``: list, show, pause, resume, trigger and delete periodic schedules.

One small function per subcommand over the client's schedule methods
(:mod:`wai.cron`). Schedules are stored by name when a process that registers
them with ``client.periodic(...)`` starts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import TYPE_CHECKING, Any

from wai.cli import _tables
from wai.cli._common import (
    admin_client,
    confirm,
    err,
    group,
    json_option,
    subparser,
    yes_option,
)
from wai.cron import Schedule

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands"]


def add_commands(sub: SubParsers) -> None:
    """Add the ``cron`` command group to ``wai``'s subcommands."""
    cron = group(sub, "cron", "list, pause, resume, trigger and delete periodic schedules")

    p = subparser(cron, "list", "every stored schedule, with its last and next fire", _cmd_list)
    json_option(p)

    p = subparser(cron, "show", "every field of one schedule", _cmd_show)
    _name_argument(p)
    json_option(p)

    p = subparser(
        cron, "pause", "stop schedule NAME from firing (redeploys keep it paused)", _cmd_pause
    )
    _name_argument(p)
    json_option(p)

    p = subparser(
        cron,
        "resume",
        "let schedule NAME fire again (missed fires follow its policy)",
        _cmd_resume,
    )
    _name_argument(p)
    json_option(p)

    p = subparser(
        cron, "trigger", "enqueue one job of schedule NAME now, even while paused", _cmd_trigger
    )
    _name_argument(p)
    json_option(p)

    p = subparser(
        cron,
        "delete",
        "delete stored schedule NAME (a process registering it stores it again on start)",
        _cmd_delete,
    )
    _name_argument(p)
    yes_option(p)


def _name_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the schedule's name")


def _schedule_json(schedule: Schedule) -> dict[str, Any]:
    return {**_tables.jsonable(schedule), "paused": schedule.paused}


_HEADERS = [
    "NAME",
    "EXPR",
    "TIMEZONE",
    "KIND",
    "QUEUE",
    "POLICY",
    "PAUSED",
    "LAST FIRE",
    "NEXT FIRE",
]


def _schedules_table(schedules: list[Schedule]) -> str:
    return _tables.table(
        _HEADERS,
        (
            [
                s.name,
                s.expr,
                s.timezone,
                s.kind,
                s.queue,
                s.missed_fire_policy,
                "yes" if s.paused else "no",
                _tables.when(s.last_fire_at),
                _tables.when(s.next_fire_at),
            ]
            for s in schedules
        ),
    )


def _compact(value: Any) -> str:
    return json.dumps(_tables.jsonable(value), sort_keys=True)


def _schedule_detail(s: Schedule) -> str:
    fields: list[tuple[str, object]] = [
        ("name", s.name),
        ("expr", s.expr),
        ("timezone", s.timezone),
        ("kind", s.kind),
        ("queue", s.queue),
        ("priority", s.priority),
        ("max attempts", s.max_attempts),
        ("tags", ", ".join(s.tags) or "-"),
        ("args", _compact(s.args)),
        ("metadata", _compact(s.metadata)),
        ("policy", s.missed_fire_policy),
        ("paused", f"yes, since {_tables.when(s.paused_at)}" if s.paused else "no"),
        ("cursor at", _tables.when(s.cursor_at)),
        ("last fire", _tables.when(s.last_fire_at)),
        ("next fire", _tables.when(s.next_fire_at)),
        ("created at", _tables.when(s.created_at)),
        ("updated at", _tables.when(s.updated_at)),
    ]
    width = max(len(name) for name, _ in fields) + 1
    return "\n".join(f"{(n + ':').ljust(width)}  {_tables.cell(v, 10_000)}" for n, v in fields)


# -- commands -----------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    schedules = admin_client(args, stack).list_cron()
    if args.json:
        print(_tables.json_text([_schedule_json(s) for s in schedules]))
        return 0
    print(_schedules_table(schedules))
    if not schedules:
        err("no periodic schedule is stored (a process stores its schedules when it starts)", "")
    return 0


def _cmd_show(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    schedule = admin_client(args, stack).get_cron(args.name)
    print(_tables.json_text(_schedule_json(schedule)) if args.json else _schedule_detail(schedule))
    return 0


def _cmd_pause(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    schedule = admin_client(args, stack).pause_cron(args.name)
    if args.json:
        print(_tables.json_text(_schedule_json(schedule)))
    else:
        print(
            f"schedule {schedule.name!r} paused: it fires nothing until `wai cron resume` "
            "(`wai cron trigger` still enqueues a job)"
        )
    return 0


def _cmd_resume(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    schedule = admin_client(args, stack).resume_cron(args.name)
    if args.json:
        print(_tables.json_text(_schedule_json(schedule)))
    else:
        print(
            f"schedule {schedule.name!r} resumed: next fire "
            f"{_tables.when(schedule.next_fire_at)} (missed fires follow its "
            f"{schedule.missed_fire_policy} policy)"
        )
    return 0


def _cmd_trigger(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    row = admin_client(args, stack).trigger_cron(args.name)
    if args.json:
        print(_tables.json_text(row))
    else:
        print(f"schedule {args.name!r} triggered: job {row.id} ({row.kind}) on queue {row.queue!r}")
    return 0


def _cmd_delete(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    client = admin_client(args, stack)
    schedule = client.get_cron(args.name)  # an unknown name fails before any prompt
    if not confirm(f"delete periodic schedule {schedule.name!r}", yes=args.yes):
        err("aborted: nothing deleted", "")
        return 1
    client.delete_cron(schedule.name)
    print(
        f"schedule {schedule.name!r} deleted (a process that registers it stores it again "
        "when it starts)"
    )
    return 0
