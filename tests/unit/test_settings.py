"""RuntimeSettings validation, and the role a runtime records (pure: no database)."""

from __future__ import annotations

import math
from typing import Any

import pytest

import wai
from wai.worker import RuntimeSettings
from wai.worker._records import role_of


def test_runtime_settings_defaults_for_records_cleanup_and_aging() -> None:
    s = RuntimeSettings()
    assert s.record_interval == 5.0
    assert s.cleanup_interval == 60.0
    assert s.completed_retention == 86_400.0
    assert s.failed_retention == s.cancelled_retention == 7 * 86_400.0
    assert s.outbox_retention == 7 * 86_400.0
    assert s.outbox_max_attempts == 10
    assert s.aging_interval == 10.0
    assert s.completion_writers == 2


@pytest.mark.parametrize(
    "options",
    [
        {"cleanup_interval": 0},
        {"completed_retention": -1},
        {"failed_retention": True},
        {"cancelled_retention": "7d"},
        {"completed_retention": math.inf},
        {"failed_retention": math.nan},
        {"record_interval": 0},
        {"aging_interval": -0.5},
        {"outbox_retention": 0},
        {"outbox_retention": math.inf},
        {"outbox_max_attempts": 0},
        {"outbox_max_attempts": 1001},
        {"outbox_max_attempts": 2.5},
        {"outbox_max_attempts": True},
        {"completion_writers": 0},
        {"completion_writers": 17},
        {"completion_writers": 1.5},
        {"completion_writers": True},
        {"completion_batch_size": 0},
        {"completion_flush_interval": -0.001},
    ],
)
def test_runtime_settings_reject_bad_values(options: dict[str, Any]) -> None:
    with pytest.raises(wai.ValidationError):
        RuntimeSettings(**options)


def test_role_of() -> None:
    assert role_of(serves_queues=True, maintenance=True) == "worker+maintenance"
    assert role_of(serves_queues=True, maintenance=False) == "worker"
    assert role_of(serves_queues=False, maintenance=True) == "maintenance"
