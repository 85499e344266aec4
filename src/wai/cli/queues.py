"""``wai queues ...``: list queues with their counts, pause, resume or drain one, set its limits."""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from wai._flow import MAX_LIMIT, RateLimit
from wai._inserts import validate_queue
from wai._kinds import validate_kind
from wai.cli import _tables
from wai.cli._common import (
    UsageError,
    admin_client,
    confirm,
    err,
    group,
    int_in,
    json_option,
    number_in,
    subparser,
    yes_option,
)
from wai.cli.outbox import stats_line

if TYPE_CHECKING:
    from wai._admin import QueueStats
    from wai.cli._common import SubParsers

__all__ = ["add_commands", "kind_limit", "kind_limit_line", "limits_line", "merged_limits"]

_COUNT = int_in(1, MAX_LIMIT, "an integer")


def add_commands(sub: SubParsers) -> None:
    """Add the ``queues`` command group to ``wai``'s subcommands."""
    queues = group(sub, "queues", "list, pause, resume and drain queues, and set their limits")
    p = subparser(
        queues, "list", "counts by state, pause flag, lag and flow control per queue", _cmd_list
    )
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
    _add_limit(queues)


def _add_limit(queues: SubParsers) -> None:
    p = subparser(
        queues,
        "limit",
        "set or lift the rate limit and global concurrency of queue NAME, or the rate limit "
        "of one kind within it, for every worker",
        _cmd_limit,
    )
    p.add_argument("name", metavar="NAME", help="the queue")
    p.add_argument(
        "--kind",
        metavar="KIND",
        help="set or lift the rate limit of the jobs of KIND within the queue instead, with "
        "--rate/--per/--burst or --no-rate (a kind has only a rate limit)",
    )
    rate = p.add_mutually_exclusive_group()
    rate.add_argument(
        "--rate",
        metavar="N",
        type=_COUNT,
        help=f"at most N jobs start every --per seconds, across all workers (1..{MAX_LIMIT:,})",
    )
    rate.add_argument("--no-rate", action="store_true", help="lift the rate limit")
    p.add_argument(
        "--per",
        metavar="SECONDS",
        type=number_in(0.001, 86_400, "a number of seconds"),
        help="the period of --rate, 0.001..86400 (default 1)",
    )
    p.add_argument(
        "--burst",
        metavar="N",
        type=_COUNT,
        help="the most jobs that start at once after a quiet spell (default: a tenth of "
        "--rate, at least 1)",
    )
    concurrency = p.add_mutually_exclusive_group()
    concurrency.add_argument(
        "--global-concurrency",
        metavar="N",
        type=_COUNT,
        help=f"at most N attempts run at once, across all workers (1..{MAX_LIMIT:,})",
    )
    concurrency.add_argument(
        "--no-global-concurrency", action="store_true", help="lift the global concurrency"
    )
    json_option(p)


def _cmd_list(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    client = admin_client(args, stack)
    stats = client.queue_stats()
    if args.json:
        print(_tables.json_text(stats))
        return 0
    print(_tables.queues_table(stats))
    flow = _tables.flow_table(stats)
    if flow is not None:
        print(f"\n{flow}")
    kinds = _tables.kind_limits_table(stats)
    if kinds is not None:
        print(f"\n{kinds}")
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


def merged_limits(
    args: argparse.Namespace, current: QueueStats | None
) -> tuple[RateLimit | None, int | None]:
    """The limits ``wai queues limit`` stores: those the options give, the current ones else.

    ``--rate`` gives a whole rate limit (``--per`` defaults to 1 second, ``--burst`` to a
    tenth of the rate), ``--no-rate`` none; ``--global-concurrency N`` and
    ``--no-global-concurrency`` likewise. A limit no option mentions keeps its current
    value (``current``: the queue's statistics, None for a queue not known yet). Raises
    :class:`UsageError` when no option is given, or ``--per`` or ``--burst`` without
    ``--rate``.
    """
    if args.rate is None and (args.per is not None or args.burst is not None):
        given = "--per" if args.per is not None else "--burst"
        raise UsageError(f"{given} goes with --rate N (the rate limit is set whole)")
    mentioned = (args.rate, args.no_rate, args.global_concurrency, args.no_global_concurrency)
    if all(option in (None, False) for option in mentioned):
        raise UsageError(
            "nothing to change: give --rate N [--per SECONDS] [--burst N], --no-rate, "
            "--global-concurrency N or --no-global-concurrency"
        )
    if args.rate is not None:
        per = args.per if args.per is not None else 1.0
        rate: RateLimit | None = RateLimit(args.rate, per=per, burst=args.burst)
    elif args.no_rate:
        rate = None
    else:
        rate = current.rate_limit if current is not None else None
    if args.global_concurrency is not None:
        concurrency: int | None = args.global_concurrency
    elif args.no_global_concurrency:
        concurrency = None
    else:
        concurrency = current.global_concurrency if current is not None else None
    return rate, concurrency


def limits_line(name: str, rate: RateLimit | None, concurrency: int | None) -> str:
    """``queue 'q' limits: rate 50/1s burst 10, global concurrency 5``."""
    rate_text = f"rate {rate}" if rate is not None else "no rate limit"
    concurrency_text = (
        f"global concurrency {concurrency}" if concurrency is not None else "no global concurrency"
    )
    return f"queue {name!r} limits: {rate_text}, {concurrency_text}"


def kind_limit(args: argparse.Namespace) -> RateLimit | None:
    """The rate limit ``wai queues limit NAME --kind KIND`` stores for the kind (None: lift).

    ``--rate`` gives a whole rate limit (``--per`` defaults to 1 second, ``--burst`` to a
    tenth of the rate), ``--no-rate`` none. Raises :class:`UsageError` for an option of
    the queue's global concurrency (a kind has only a rate limit), for neither ``--rate``
    nor ``--no-rate``, and for ``--per`` or ``--burst`` without ``--rate``.
    """
    if args.global_concurrency is not None or args.no_global_concurrency:
        given = "--no-global-concurrency" if args.no_global_concurrency else "--global-concurrency"
        raise UsageError(f"{given} does not go with --kind: a kind has only a rate limit")
    if args.rate is None and (args.per is not None or args.burst is not None):
        given = "--per" if args.per is not None else "--burst"
        raise UsageError(f"{given} goes with --rate N (the rate limit is set whole)")
    rate: int | None = args.rate
    if rate is None:
        if args.no_rate:
            return None
        raise UsageError(
            "nothing to change: give --kind KIND with --rate N [--per SECONDS] [--burst N] "
            "or --no-rate"
        )
    per = args.per if args.per is not None else 1.0
    return RateLimit(rate, per=per, burst=args.burst)


def kind_limit_line(name: str, kind: str, rate: RateLimit | None) -> str:
    """``queue 'q' kind 'charge' limit: rate 10/1s burst 1``."""
    rate_text = f"rate {rate}" if rate is not None else "no rate limit"
    return f"queue {name!r} kind {kind!r} limit: {rate_text}"


def _cmd_kind_limit(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    name: str = args.name
    kind: str = args.kind
    validate_queue(name)  # bad names, or options that say nothing, fail before connecting
    validate_kind(kind)
    rate = kind_limit(args)
    client = admin_client(args, stack)
    client.set_kind_rate_limit(name, kind, rate)
    if rate is not None:  # as stored: the burst resolved
        rate = RateLimit(rate.limit, per=rate.per, burst=rate.capacity)
    if args.json:
        print(_tables.json_text({"queue": name, "kind": kind, "rate_limit": rate}))
    else:
        print(kind_limit_line(name, kind, rate))
    return 0


def _cmd_limit(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    if args.kind is not None:
        return _cmd_kind_limit(args, stack)
    name: str = args.name
    validate_queue(name)  # a bad name, or options that say nothing, fail before connecting
    merged_limits(args, None)
    client = admin_client(args, stack)
    # set_queue_limits replaces both limits: read the one the options leave alone.
    current = next((q for q in client.queue_stats() if q.name == name), None)
    rate, concurrency = merged_limits(args, current)
    client.set_queue_limits(name, rate_limit=rate, global_concurrency=concurrency)
    if rate is not None:  # as stored: the burst resolved
        rate = RateLimit(rate.limit, per=rate.per, burst=rate.capacity)
    if args.json:
        print(
            _tables.json_text(
                {"queue": name, "rate_limit": rate, "global_concurrency": concurrency}
            )
        )
    else:
        print(limits_line(name, rate, concurrency))
    return 0
