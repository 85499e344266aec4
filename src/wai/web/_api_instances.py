"""Runtime instances: the live worker and maintenance processes, and registry drift."""

from __future__ import annotations

from typing import Any

from wai._instances import registry_drift
from wai.web._encode import RUNTIME_INSTANCE
from wai.web._endpoint import Call

__all__ = ["list_instances"]


async def list_instances(call: Call) -> dict[str, Any]:
    """Every live process as it last recorded itself, and the specs they disagree on.

    ``drift`` has the shape of ``wai instances list --json``: one object per (kind,
    outcome) whose follow-up specs differ between the processes that hold any.
    """
    instances = await call.client.list_runtime_instances()
    return {
        "items": [RUNTIME_INSTANCE.encode(i) for i in instances],
        "drift": [
            {"kind": kind, "outcome": outcome, "specs_by_instance": views}
            for (kind, outcome), views in registry_drift(instances).items()
        ],
    }
