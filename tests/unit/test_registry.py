"""Registry.copy: the same registrations, and later ones stay in the registry they went to."""

from __future__ import annotations

from dataclasses import dataclass

import wai
from wai._registry import Registry


@dataclass
class Ping:
    n: int


def test_copy_holds_the_registrations_and_grows_apart() -> None:
    client = wai.Client("postgresql://nowhere.invalid/never-opened")

    @client.task(Ping, queue="pings")
    def ping(job: wai.Job[Ping]) -> None:
        return None

    client.on_completed_enqueue(Ping, lambda args, job: Ping(n=args.n + 1), name="next")
    original: Registry = client.registry
    copy = original.copy()
    assert copy.tasks == original.tasks
    assert copy.specs_for("ping", "completed") == original.specs_for("ping", "completed")
    assert copy.has_specs("ping")
    assert copy.queues() == ["pings"]

    copy.add_hook(Ping, lambda event: None)
    copy.add_spec(Ping, "completed", lambda args, job: None, with_request=False, name="more")
    assert original.hooks == {}
    assert [s.name for s in original.specs_for("ping", "completed")] == ["next"]
    assert [s.name for s in copy.specs_for("ping", "completed")] == ["next", "more"]
