"""``wai instances list``: the live worker and maintenance processes, and registry drift."""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING

from wai._instances import registry_drift
from wai.cli import _tables
from wai.cli._common import admin_client, err, group, json_option, subparser

if TYPE_CHECKING:
    from wai.cli._common import SubParsers

__all__ = ["add_commands"]


def add_commands(sub: SubParsers) -> None:
    """Add the ``instances`` command group to ``wai``'s subcommands."""
    instances = group(sub, "instances", "live worker and maintenance processes")
    p = subparser(
        instances,
        "list",
        "live processes: role, queues, leader, health, follow-up specs, registry drift",
        _cmd_list,
    )
    json_option(p)


def _cmd_list(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    instances = admin_client(args, stack).list_runtime_instances()
    drift = registry_drift(instances)
    if args.json:
        print(
            _tables.json_text(
                {
                    "instances": instances,
                    "drift": [
                        {"kind": k, "outcome": o, "specs_by_instance": views}
                        for (k, o), views in drift.items()
                    ],
                }
            )
        )
        return 0
    print(_tables.instances_table(instances))
    for (kind, outcome), views in drift.items():
        err(f"registry drift on {kind} → {outcome}:", "")
        for instance, names in views.items():
            err(f"  {instance}: {', '.join(names) or '(no spec)'}", "")
    return 0
