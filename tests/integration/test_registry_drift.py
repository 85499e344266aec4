"""Each process publishes the follow-up specs it holds; drift between processes shows."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass

import wai
from tests.integration._helpers import FAST, wait_for
from wai._instances import registry_drift


@dataclass
class Order:
    order_id: int


@dataclass
class Receipt:
    order_id: int


async def test_runtime_records_publish_specs_and_drift_is_reported(database_url: str) -> None:
    old = wai.AsyncClient(database_url)
    new = wai.AsyncClient(database_url)
    for client in (old, new):
        client.on_completed_enqueue(Order, lambda a, j: Receipt(a.order_id), name="receipt")
    new.on_completed_enqueue(Order, lambda a, j: Receipt(-a.order_id), name="audit")
    new.on_exhausted_enqueue(Order, lambda a, j, e, n: Receipt(0), name="refund")
    try:
        await old.start({"q": 1}, **FAST)
        await new.start({"q": 1}, **FAST)
        instances = await wait_for(lambda: _two(old), timeout=10, what="both runtime records")
        by_specs = sorted(len(i.specs) for i in instances)
        assert by_specs == [1, 3]
        assert ("order", "completed", "receipt") in instances[0].specs
        drift = registry_drift(instances)
        assert set(drift) == {("order", "completed"), ("order", "exhausted")}
        views = drift[("order", "completed")]
        assert sorted(map(tuple, views.values())) == [("audit", "receipt"), ("receipt",)]
        out = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable,
                "-m",
                "wai",
                "--database-url",
                database_url,
                "instances",
                "list",
                "--json",
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ},
        )
        data = json.loads(out.stdout)
        assert len(data["instances"]) == 2
        assert {(d["kind"], d["outcome"]) for d in data["drift"]} == {
            ("order", "completed"),
            ("order", "exhausted"),
        }
        table = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "wai", "--database-url", database_url, "instances", "list"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert "INSTANCE" in table.stdout
        assert "registry drift on order → completed" in table.stderr
    finally:
        await old.close()
        await new.close()


async def _two(client: wai.AsyncClient) -> list[wai.RuntimeInstance] | None:
    instances = await client.list_runtime_instances()
    return instances if len(instances) == 2 else None


async def test_agreeing_processes_show_no_drift(database_url: str) -> None:
    a = wai.AsyncClient(database_url)
    b = wai.AsyncClient(database_url)
    for client in (a, b):
        client.on_completed_enqueue(Order, lambda x, j: Receipt(x.order_id), name="receipt")
    try:
        await a.start({"q": 1}, **FAST)
        await b.start({"q": 1}, **FAST)
        instances = await wait_for(lambda: _two(a), timeout=10, what="both records")
        assert registry_drift(instances) == {}
    finally:
        await a.close()
        await b.close()
