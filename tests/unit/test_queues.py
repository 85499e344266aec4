"""QueueConfig and queue normalisation (pure: no database)."""

from __future__ import annotations

import math
from typing import Any

import pytest

import wai
from wai._queues import normalize_queues


@pytest.mark.parametrize("value", [0, -1, True, math.inf, math.nan, "1h", 1e12])
def test_queue_config_rejects_bad_retention(value: Any) -> None:
    with pytest.raises(wai.ValidationError, match="retention"):
        wai.QueueConfig(retention=value)


@pytest.mark.parametrize("value", [0, -5, False, math.inf, "10s"])
def test_queue_config_rejects_bad_priority_aging(value: Any) -> None:
    with pytest.raises(wai.ValidationError, match="priority_aging"):
        wai.QueueConfig(priority_aging=value)


def test_queue_config_accepts_retention_and_aging() -> None:
    config = wai.QueueConfig(retention=3600, priority_aging=0.5)
    assert (config.retention, config.priority_aging) == (3600, 0.5)


def test_normalize_queues_accepts_an_empty_mapping_for_maintenance_only() -> None:
    assert normalize_queues({}, ["registered"]) == {}


def test_normalize_queues_still_rejects_a_non_mapping() -> None:
    with pytest.raises(wai.ValidationError, match="queues must map"):
        normalize_queues(["email"], [])  # type: ignore[arg-type]
