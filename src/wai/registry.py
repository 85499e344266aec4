"""The process-local registry: which handler runs each kind, on which queue."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wai.errors import ValidationError
from wai.inserts import validate_queue
from wai.kinds import kind_of_type

__all__ = ["Registry", "Task", "known_queue"]

# Kinds registered by any client of this process, so that inserts made without a
# client (``wai.bridge``) still default to the kind's queue.
_KNOWN_QUEUES: dict[str, str] = {}


def known_queue(kind: str) -> str | None:
    """The queue a task of ``kind`` was registered on in this process, if any."""
    return _KNOWN_QUEUES.get(kind)


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """A registered handler and its options."""

    kind: str
    args_type: type[Any] | None
    fn: Callable[..., Any]
    queue: str
    deadline: float | None
    max_attempts: int | None
    is_async: bool


class Registry:
    """Tasks by kind. Hooks and follow-up specs are keyed the same way."""

    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}

    def add_task(
        self,
        args_type: type[Any] | str,
        fn: Callable[..., Any],
        *,
        kind: str | None = None,
        queue: str = "default",
        deadline: float | None = None,
        max_attempts: int | None = None,
    ) -> Task:
        """Register ``fn`` as the handler of ``args_type``'s kind."""
        task_kind = kind_of_type(kind if kind is not None else args_type)
        if task_kind in self.tasks:
            raise ValidationError(f"a task for kind {task_kind!r} is already registered")
        validate_queue(queue)
        if deadline is not None and (not isinstance(deadline, int | float) or deadline <= 0):
            raise ValidationError(f"deadline must be a number of seconds > 0, got {deadline!r}")
        if max_attempts is not None and (
            isinstance(max_attempts, bool)
            or not isinstance(max_attempts, int)
            or not 1 <= max_attempts <= 1000
        ):
            raise ValidationError(f"max_attempts must be 1..1000, got {max_attempts!r}")
        if not callable(fn):
            raise ValidationError(f"task handler for {task_kind!r} is not callable")
        task = Task(
            kind=task_kind,
            args_type=None if isinstance(args_type, str) else args_type,
            fn=fn,
            queue=queue,
            deadline=float(deadline) if deadline is not None else None,
            max_attempts=max_attempts,
            is_async=inspect.iscoroutinefunction(fn),
        )
        self.tasks[task_kind] = task
        _KNOWN_QUEUES[task_kind] = queue
        return task

    def queue_of(self, kind: str) -> str | None:
        """The registered queue of ``kind``, here or elsewhere in this process."""
        task = self.tasks.get(kind)
        return task.queue if task else known_queue(kind)

    def max_attempts_of(self, kind: str) -> int | None:
        """The registered default ``max_attempts`` of ``kind``."""
        task = self.tasks.get(kind)
        return task.max_attempts if task else None

    def queues(self) -> list[str]:
        """Every queue some task is registered on, in registration order."""
        return list(dict.fromkeys(t.queue for t in self.tasks.values()))
