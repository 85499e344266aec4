"""Runtime records: the row each live worker or maintenance process keeps current."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["RuntimeInstance", "registry_drift"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeInstance:
    """One worker or maintenance process, as it last recorded itself.

    *role* is ``"worker"``, ``"maintenance"`` or ``"worker+maintenance"``;
    *queues* maps each served queue to its concurrency and *concurrency* is
    their sum; *in_flight* counts the attempts the process holds; *leader* says
    whether it runs the maintenance services. *healthy* summarises *health*:
    ``listen`` (the LISTEN connection is up), ``last_claim_age`` and
    ``last_heartbeat_age`` (seconds since the last successful claim and
    heartbeat pass, None before the first), ``claim_failing``, ``stopping`` and
    ``record_interval``. *specs* lists the follow-up specs the process holds, as
    ``(kind, outcome, spec name)``: processes that disagree show registry drift
    between deployments (see :func:`registry_drift`). A process refreshes ``last_seen_at`` every
    ``record_interval`` seconds and deletes its row when it shuts down
    gracefully; the maintenance leader deletes rows not refreshed for
    3 x their record interval (at least 30 s).
    """

    instance_id: str
    hostname: str
    pid: int
    version: str
    role: str
    queues: dict[str, int]
    concurrency: int
    in_flight: int
    leader: bool
    healthy: bool
    health: dict[str, Any]
    specs: tuple[tuple[str, str, str], ...]
    started_at: datetime
    last_seen_at: datetime

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> RuntimeInstance:
        """Build from a ``dict_row`` record of the ``runtime_instances`` table."""
        return cls(
            instance_id=rec["instance_id"],
            hostname=rec["hostname"],
            pid=rec["pid"],
            version=rec["version"],
            role=rec["role"],
            queues=dict(rec["queues"] or {}),
            concurrency=rec["concurrency"],
            in_flight=rec["in_flight"],
            leader=rec["leader"],
            healthy=rec["healthy"],
            health=dict(rec["health"] or {}),
            specs=tuple((s["kind"], s["outcome"], s["spec"]) for s in rec.get("specs") or ()),
            started_at=rec["started_at"],
            last_seen_at=rec["last_seen_at"],
        )


def registry_drift(
    instances: Sequence[RuntimeInstance],
) -> dict[tuple[str, str], dict[str, list[str]]]:
    """Follow-up specs that some live processes hold and others do not.

    Returns ``{(kind, outcome): {instance_id: [spec names]}}`` for each (kind,
    outcome) whose spec list differs between the processes that hold any spec for
    it, or that only some processes hold — empty when every process agrees.
    Processes that hold no spec at all (a CLI, a bare admin process) are ignored.
    """
    holders = [i for i in instances if i.specs]
    keys = {(k, o) for i in holders for k, o, _ in i.specs}
    drift: dict[tuple[str, str], dict[str, list[str]]] = {}
    for key in sorted(keys):
        views = {
            i.instance_id: sorted(name for k, o, name in i.specs if (k, o) == key) for i in holders
        }
        if len({tuple(v) for v in views.values()}) > 1:
            drift[key] = views
    return drift
