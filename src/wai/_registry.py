"""The process-local registry: which handler runs each kind, on which queue."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wai._codec import check_decodable
from wai._followups import OUTCOMES, Spec, default_name
from wai._kinds import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE,
    KindDefaults,
    declare,
    declared,
    kind_of_type,
    validate_queue,
)
from wai._seconds import check_seconds
from wai._storable import check_text
from wai.cron import Periodic
from wai.errors import ValidationError

__all__ = ["Registry", "Task", "known_queue"]

# Kinds registered by any client of this process, so that inserts made without a
# client (``wai.bridge``) of dict args with ``kind=`` still default to the kind's queue.
_KNOWN_QUEUES: dict[str, str] = {}

# Args types whose defaults a task registration declared, in order (tests undo them).
_DECLARED_BY_TASKS: list[type[Any]] = []


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
    #: "worker" (the worker writes the outcome) or "caller" (the handler completes the
    #: job in its own transaction with ``job.complete_in(tx)``).
    completion: str = "worker"


_CALLER_COMPLETED = (
    "kind {kind!r} completes with completion='caller': its handler commits the completion "
    "in its own transaction, so on_completed_enqueue cannot commit with it; insert the "
    "follow-ups in that transaction instead (tx.insert(...))"
)


class Registry:
    """Tasks by kind. Hooks and follow-up specs are keyed the same way."""

    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}
        self.hooks: dict[str, list[Callable[..., Any]]] = {}
        self.specs: dict[tuple[str, str], list[Spec]] = {}
        self._spec_kinds: set[str] = set()
        self.args_types: dict[str, type[Any]] = {}
        self.periodics: dict[str, Periodic] = {}

    def copy(self) -> Registry:
        """A registry holding the same registrations; what is added to either stays its own."""
        other = Registry()
        other.tasks = dict(self.tasks)
        other.hooks = {kind: list(fns) for kind, fns in self.hooks.items()}
        other.specs = {key: list(specs) for key, specs in self.specs.items()}
        other._spec_kinds = set(self._spec_kinds)
        other.args_types = dict(self.args_types)
        other.periodics = dict(self.periodics)
        return other

    def add_periodic(self, periodic: Periodic) -> None:
        """Register a periodic schedule; its name must be new to this registry."""
        if periodic.name in self.periodics:
            raise ValidationError(f"a periodic schedule named {periodic.name!r} is registered")
        self.periodics[periodic.name] = periodic

    def _remember_type(self, kind: str, kind_or_type: type[Any] | str) -> None:
        if not isinstance(kind_or_type, str):
            check_decodable(kind_or_type)
            self.args_types.setdefault(kind, kind_or_type)

    def args_type_of(self, kind: str) -> type[Any] | None:
        """The args type registered for ``kind`` (by a task, hook or spec), if any."""
        task = self.tasks.get(kind)
        if task is not None and task.args_type is not None:
            return task.args_type
        return self.args_types.get(kind)

    def add_hook(self, kind_or_type: type[Any] | str, fn: Callable[..., Any]) -> None:
        """Register an ``on_event`` hook for a kind (``"*"`` for every kind)."""
        if not callable(fn):
            raise ValidationError("an on_event hook must be callable")
        kind = "*" if kind_or_type == "*" else kind_of_type(kind_or_type)
        self._remember_type(kind, kind_or_type)
        self.hooks.setdefault(kind, []).append(fn)

    def hooks_for(self, kind: str) -> list[Callable[..., Any]]:
        """Hooks of ``kind`` then the catch-all ones, in registration order."""
        return [*self.hooks.get(kind, ()), *self.hooks.get("*", ())]

    def add_spec(
        self,
        kind_or_type: type[Any] | str,
        outcome: str,
        fn: Callable[..., Any],
        *,
        with_request: bool,
        name: str | None = None,
    ) -> Spec:
        """Register a follow-up closure for ``outcome`` of a kind."""
        if outcome not in OUTCOMES:
            raise ValidationError(f"unknown outcome {outcome!r}: one of {', '.join(OUTCOMES)}")
        if not callable(fn):
            raise ValidationError("a follow-up spec must be callable")
        kind = kind_of_type(kind_or_type)
        task = self.tasks.get(kind)
        if outcome == "completed" and task is not None and task.completion == "caller":
            raise ValidationError(_CALLER_COMPLETED.format(kind=kind))
        self._remember_type(kind, kind_or_type)
        existing = self.specs.setdefault((kind, outcome), [])
        self._spec_kinds.add(kind)
        base = name if name is not None else default_name(fn)
        if not isinstance(base, str) or not 1 <= len(base) <= 500:
            raise ValidationError(f"spec name must be 1-500 characters, got {base!r}")
        check_text(base, "spec name")
        taken = {s.name for s in existing}
        if name is not None and base in taken:
            raise ValidationError(
                f"a spec named {base!r} is already registered for {kind} → {outcome}"
            )
        unique, n = base, 1
        # Closures sharing a qualified name (lambdas, say) still need distinct lineage keys.
        while unique in taken:
            n += 1
            unique = f"{base}#{n}"
        spec = Spec(kind=kind, outcome=outcome, fn=fn, with_request=with_request, name=unique)
        existing.append(spec)
        return spec

    def specs_for(self, kind: str, outcome: str) -> list[Spec]:
        """Specs of ``(kind, outcome)`` in registration order."""
        return self.specs.get((kind, outcome), [])

    def has_specs(self, kind: str) -> bool:
        """Whether any follow-up spec is registered for ``kind``, whatever its outcome."""
        return kind in self._spec_kinds

    def reads_row(self, kind: str, outcome: str) -> bool:
        """Whether a committed ``outcome`` of ``kind`` is handed its row: a follow-up
        spec matches it or an ``on_event`` hook listens to the kind."""
        hooks = self.hooks
        return bool(self.specs.get((kind, outcome)) or hooks.get(kind) or hooks.get("*"))

    def published_specs(self) -> list[dict[str, str]]:
        """What this process can dispatch, for its runtime record: kind, outcome, spec name."""
        return [
            {"kind": s.kind, "outcome": s.outcome, "spec": s.name}
            for specs in self.specs.values()
            for s in specs
        ]

    def add_task(
        self,
        args_type: type[Any] | str,
        fn: Callable[..., Any],
        *,
        kind: str | None = None,
        queue: str | None = None,
        deadline: float | None = None,
        max_attempts: int | None = None,
        completion: str = "worker",
    ) -> Task:
        """Register ``fn`` as the handler of ``args_type``'s kind.

        ``completion="caller"``: the handler completes its job in its own transaction
        (``job.complete_in(tx)``); such a kind takes no ``on_completed_enqueue`` spec.

        For an args type of its own kind, the options settle with what the type
        declares (:func:`settle_defaults`); a kind given by name, or a type used
        under another kind, keeps them here only.
        """
        task_kind = kind_of_type(kind if kind is not None else args_type)
        if task_kind in self.tasks:
            raise ValidationError(f"a task for kind {task_kind!r} is already registered")
        if queue is not None:
            validate_queue(queue)
        if deadline is not None:
            deadline = check_seconds(deadline, "deadline")
        if max_attempts is not None and (
            isinstance(max_attempts, bool)
            or not isinstance(max_attempts, int)
            or not 1 <= max_attempts <= 1000
        ):
            raise ValidationError(f"max_attempts must be 1..1000, got {max_attempts!r}")
        if not callable(fn):
            raise ValidationError(f"task handler for {task_kind!r} is not callable")
        if completion not in ("worker", "caller"):
            raise ValidationError(f"completion must be 'worker' or 'caller', got {completion!r}")
        if completion == "caller" and self.specs.get((task_kind, "completed")):
            raise ValidationError(_CALLER_COMPLETED.format(kind=task_kind))
        typed = None if isinstance(args_type, str) else args_type
        if typed is not None:
            check_decodable(typed)
            if task_kind == kind_of_type(typed):
                settled = settle_defaults(
                    typed, queue=queue, deadline=deadline, max_attempts=max_attempts
                )
                queue, deadline = settled.queue, settled.deadline
                max_attempts = settled.max_attempts
        task = Task(
            kind=task_kind,
            args_type=typed,
            fn=fn,
            queue=queue if queue is not None else DEFAULT_QUEUE,
            deadline=deadline,
            max_attempts=max_attempts,
            is_async=inspect.iscoroutinefunction(fn),
            completion=completion,
        )
        self.tasks[task_kind] = task
        _KNOWN_QUEUES[task_kind] = task.queue
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


def settle_defaults(
    args_type: type[Any],
    *,
    queue: str | None,
    deadline: float | None,
    max_attempts: int | None,
) -> KindDefaults:
    """The defaults of a task's args type, once the task's options are settled with them.

    A type that declares nothing gets the task's options declared onto it, so that
    every client of the process inserts it alike. A type that declares its defaults
    keeps them; a task option that differs from the declared one (unset meaning queue
    ``"default"``, 25 attempts, no deadline) raises :class:`wai.ValidationError`.
    """
    found = declared(args_type)
    if found is None:
        found = KindDefaults(queue=queue, deadline=deadline, max_attempts=max_attempts)
        declare(args_type, found)
        _DECLARED_BY_TASKS.append(args_type)
        return found
    conflicts = [
        f"{option}={given!r} (declared: {have!r})"
        for option, given, have in (
            ("queue", queue, found.queue or DEFAULT_QUEUE),
            ("max_attempts", max_attempts, found.max_attempts or DEFAULT_MAX_ATTEMPTS),
            ("deadline", deadline, found.deadline),
        )
        if given is not None and given != have
    ]
    if conflicts:
        name = args_type.__name__
        raise ValidationError(
            f"the task for {name} sets {', '.join(conflicts)}, but {name} already declares "
            "its kind's defaults (with @wai.kind, or by an earlier @client.task in this "
            "process): declare them once, on the type, and leave them out of @client.task"
        )
    return found
