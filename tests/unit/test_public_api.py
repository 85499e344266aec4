"""The public surface of wai: what it exports, and that each of those names is documented.

Adding or removing a name of ``wai.__all__`` is a deliberate change: update
:data:`EXPECTED` with it.
"""

from __future__ import annotations

import importlib
import inspect
import types
from typing import Any

import pytest

import wai

EXPECTED = {
    "AsyncClient",
    "AsyncTransaction",
    "CallbackNotFound",
    "CallbackResolution",
    "CallbackTimeout",
    "CallbackToken",
    "Cancel",
    "Client",
    "DatabaseError",
    "DlqEntry",
    "EnqueueRequest",
    "FollowUpError",
    "Health",
    "InvalidStateError",
    "Job",
    "JobNotFound",
    "JobRow",
    "JobState",
    "JsonFormatter",
    "KindDefaults",
    "Lineage",
    "NoDatabaseURL",
    "OutboxEntry",
    "OutboxRowNotFound",
    "OutboxStats",
    "QueueConfig",
    "QueueDepth",
    "QueueStats",
    "RateLimit",
    "ThroughputMinute",
    "RescueReason",
    "RetryAfter",
    "RuntimeHealth",
    "RuntimeInstance",
    "Schedule",
    "ScheduleNotFound",
    "SchemaNotMigrated",
    "SerializationError",
    "Snooze",
    "StaleAttempt",
    "TerminalError",
    "Transaction",
    "Trigger",
    "UniqueConflict",
    "UniqueOpts",
    "UnknownJobKind",
    "ValidationError",
    "WaiError",
    "WaitForCallback",
    "WaitingJob",
    "__version__",
    "bridge",
    "events",
    "kind",
    "metrics",
}

#: The classes users call methods on: each public method and property is documented.
API_CLASSES = [wai.AsyncClient, wai.Client, wai.AsyncTransaction, wai.Transaction, wai.Job]

#: The modules README.md and docs/ tell users to import from.
PUBLIC_MODULES = [
    "wai.bridge",
    "wai.bridges",
    "wai.bridges.asyncpg",
    "wai.bridges.sqlalchemy",
    "wai.events",
    "wai.metrics",
    "wai.errors",
    "wai.dlq",
    "wai.cron",
    "wai.outbox",
    "wai.callbacks",
    "wai.callbacks.ingress",
    "wai.callbacks.signing",
    "wai.web",
    "wai.worker",
    "wai.cli",
    "wai.contrib.django",
    "wai.testing",
]


def _documented(obj: Any) -> bool:
    doc = obj.__doc__  # not inspect.getdoc: a class must not borrow its base's docstring
    return isinstance(doc, str) and bool(doc.strip())


def _needs_doc(obj: Any) -> bool:
    """Classes, functions and modules carry a docstring; constants and type aliases cannot."""
    return isinstance(obj, types.ModuleType) or inspect.isclass(obj) or inspect.isroutine(obj)


def test_all_is_the_expected_set() -> None:
    assert set(wai.__all__) == EXPECTED
    assert len(wai.__all__) == len(EXPECTED), "a name listed twice in wai.__all__"


@pytest.mark.parametrize("name", sorted(EXPECTED - {"__version__"}))
def test_every_exported_name_imports_and_is_documented(name: str) -> None:
    obj = getattr(wai, name)
    assert _documented(obj), f"wai.{name} has no docstring"


def test_version_is_a_string() -> None:
    assert isinstance(wai.__version__, str)
    assert wai.__version__


def _public_members(cls: type) -> list[tuple[str, Any]]:
    members: list[tuple[str, Any]] = []
    for name in dir(cls):
        if name.startswith("_"):
            continue
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, (staticmethod, classmethod)):
            attr = attr.__func__
        if isinstance(attr, property) or inspect.isfunction(attr):
            members.append((name, attr))
    return members


@pytest.mark.parametrize("cls", API_CLASSES, ids=lambda c: c.__name__)
def test_public_methods_and_properties_are_documented(cls: type) -> None:
    members = _public_members(cls)
    assert members, f"{cls.__name__} shows no public methods"
    missing = [name for name, attr in members if not (attr.__doc__ or "").strip()]
    assert not missing, f"{cls.__name__} lacks docstrings on: {missing}"


@pytest.mark.parametrize("name", ["build", "build_many", "connection"], ids=lambda n: f"no-{n}")
@pytest.mark.parametrize("cls", [wai.AsyncClient, wai.Client], ids=lambda c: c.__name__)
def test_client_internals_are_private(cls: type, name: str) -> None:
    assert not hasattr(cls, name)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_module_has_docstring_and_documented_all(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert _documented(module), f"{module_name} has no module docstring"
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{module_name} has no __all__"
    undocumented = [
        name
        for name in exported
        if _needs_doc(getattr(module, name)) and not _documented(getattr(module, name))
    ]
    assert not undocumented, f"{module_name} lacks docstrings on: {undocumented}"


def test_private_modules_are_not_the_public_path() -> None:
    """The names wai re-exports live in private modules; the public path is ``wai``."""
    assert wai.JobRow.__module__.startswith("wai._")
    assert wai.Job.__module__.startswith("wai._")


def test_group_commit_is_a_setting_of_the_async_client() -> None:
    """``AsyncClient(group_commit=...)``; its constructor takes every other setting the
    sync client takes, with the same defaults (it forwards them)."""
    mine = inspect.signature(wai.AsyncClient).parameters
    shared = inspect.signature(wai.Client).parameters
    assert "group_commit" in mine
    assert mine["group_commit"].default is False
    assert "group_commit" not in shared
    for name, param in shared.items():
        assert name in mine, f"AsyncClient() does not take {name}"
        assert mine[name].default == param.default, name
        assert mine[name].kind == param.kind, name
