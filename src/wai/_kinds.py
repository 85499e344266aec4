"""Job kinds: their names, and the defaults an args type declares for its kind (no I/O).

A kind's defaults (queue, priority, max_attempts, deadline, its name) live on its args
type, set by :func:`kind` or by the first ``@client.task`` of the type, so that every
insert of the type, by any client, the bridge or a follow-up, agrees with the worker. The
args codec is in :mod:`wai._codec` (re-exported here).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from wai._codec import decode_args, dumps, encode_args
from wai._seconds import check_seconds
from wai.errors import ValidationError

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_PRIORITY",
    "DEFAULT_QUEUE",
    "KindDefaults",
    "check_int",
    "declare",
    "declared",
    "decode_args",
    "dumps",
    "encode_args",
    "kind",
    "kind_and_defaults",
    "kind_of",
    "kind_of_type",
    "snake_case",
    "undeclare",
    "validate_kind",
    "validate_queue",
]

T = TypeVar("T")

#: What a job gets when neither the insert, its args type nor a registry says otherwise.
DEFAULT_QUEUE = "default"
DEFAULT_PRIORITY = 2
DEFAULT_MAX_ATTEMPTS = 25

_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_WORD = re.compile(r"([a-z0-9])([A-Z])")
# fullmatch: `$` would also match before a trailing newline ("charge\n").
_NAME = re.compile(r"[A-Za-z0-9_.:\-]{1,200}")


def snake_case(name: str) -> str:
    """``SendEmail`` → ``send_email``, ``HTMLToPDF`` → ``html_to_pdf``."""
    return _WORD.sub(r"\1_\2", _ACRONYM.sub(r"\1_\2", name)).lower()


# Valid names are remembered, so that a batch of jobs of one kind checks it once. Invalid
# ones raise, and lru_cache caches no exception.
@functools.lru_cache(maxsize=4096)
def _valid_kind(kind: str) -> str:
    if not _NAME.fullmatch(kind):
        raise ValidationError(
            f"invalid job kind {kind!r}: use 1-200 letters, digits, '_', '.', ':' or '-'"
        )
    return kind


@functools.lru_cache(maxsize=4096)
def _kind_of_class_name(name: str) -> str:
    return _valid_kind(snake_case(name))


def validate_kind(kind: str) -> str:
    """Return ``kind`` if it is a usable job kind, else raise ValidationError."""
    if not isinstance(kind, str):
        raise ValidationError(
            f"invalid job kind {kind!r}: use 1-200 letters, digits, '_', '.', ':' or '-'"
        )
    return _valid_kind(kind)


def _invalid_queue(queue: object) -> ValidationError:
    return ValidationError(
        f"invalid queue name {queue!r}: use 1-200 letters, digits, '_', '.', ':' or '-'"
    )


# Valid names are remembered (a batch usually names one queue); lru_cache caches no exception.
@functools.lru_cache(maxsize=4096)
def _valid_queue(queue: str) -> str:
    if not _NAME.fullmatch(queue):
        raise _invalid_queue(queue)
    return queue


def validate_queue(queue: str) -> str:
    """Return ``queue`` if it is a usable queue name, else raise ValidationError."""
    if not isinstance(queue, str):
        raise _invalid_queue(queue)
    return _valid_queue(queue)


def check_int(name: str, value: object, low: int, high: int) -> int:
    """Return ``value`` if it is an int (never a bool) from ``low`` to ``high``."""
    if type(value) is int and low <= value <= high:  # the usual case, without isinstance
        return value
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return value


# -- declared defaults ------------------------------------------------------------------

#: The class attribute holding an args type's :class:`KindDefaults`.
ATTRIBUTE = "__wai_kind__"


@dataclass(frozen=True, slots=True, kw_only=True)
class KindDefaults:
    """The defaults an args type declares for its kind; None leaves one to the insert.

    ``name`` replaces the snake_case class name as the kind; ``queue``, ``priority`` and
    ``max_attempts`` apply to every insert of the type that does not set them;
    ``deadline`` bounds each attempt in the worker (seconds).
    """

    name: str | None = None
    queue: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    deadline: float | None = None

    def __post_init__(self) -> None:
        if self.name is not None:
            validate_kind(self.name)
        if self.queue is not None:
            validate_queue(self.queue)
        if self.priority is not None:
            check_int("priority", self.priority, 1, 4)
        if self.max_attempts is not None:
            check_int("max_attempts", self.max_attempts, 1, 1000)
        if self.deadline is not None:
            object.__setattr__(self, "deadline", check_seconds(self.deadline, "deadline"))


def kind(
    *,
    name: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    deadline: float | None = None,
) -> Callable[[type[T]], type[T]]:
    """Declare the defaults of an args type's kind, for every client that inserts it.

    ::

        @wai.kind(queue="signup", max_attempts=10)
        @dataclass
        class Signup:
            user_id: int

    Any insert of ``Signup(...)`` (``AsyncClient`` or ``Client``, ``insert_many``,
    ``copy_many``, a transaction, :mod:`wai.bridge`, a follow-up) then goes to queue
    ``signup`` with 10 attempts unless it says otherwise, whatever that client has
    registered; ``@client.task(Signup)`` takes the same defaults. ``name`` sets the
    kind (default: the class name in snake_case), ``deadline`` the seconds one attempt
    may run. A subclass does not inherit the declaration. Raises
    :class:`wai.ValidationError` for an invalid value or a type declared twice.
    """
    defaults = KindDefaults(
        name=name, queue=queue, priority=priority, max_attempts=max_attempts, deadline=deadline
    )

    def declare_on(cls: type[T]) -> type[T]:
        declare(cls, defaults)
        return cls

    return declare_on


def declared(cls: type[Any]) -> KindDefaults | None:
    """The defaults ``cls`` itself declares (not those of a base class), if any."""
    found = cls.__dict__.get(ATTRIBUTE)
    return found if isinstance(found, KindDefaults) else None


def declare(cls: type[Any], defaults: KindDefaults) -> None:
    """Set ``defaults`` on args type ``cls``; raises if it already declares some."""
    if not isinstance(cls, type):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValidationError(f"@wai.kind(...) decorates an args class, not {cls!r}")
    if issubclass(cls, Mapping):
        raise ValidationError(
            "dict args have no type to declare defaults on: pass insert options, "
            "or register a task for the kind"
        )
    if declared(cls) is not None:
        raise ValidationError(f"{cls.__name__} already declares its kind's defaults")
    setattr(cls, ATTRIBUTE, defaults)
    _CLASS_KINDS.pop(cls, None)


def undeclare(cls: type[Any]) -> None:
    """Remove the defaults ``cls`` declares (a test's registrations, undone)."""
    if declared(cls) is not None:
        delattr(cls, ATTRIBUTE)
        _CLASS_KINDS.pop(cls, None)


# -- kinds of args ----------------------------------------------------------------------

# The kind and declaration of each args class met, so that an insert looks them up once
# (never a mapping class: dict args name their kind). declare and undeclare drop an entry.
_CLASS_KINDS: dict[type[Any], tuple[str, KindDefaults | None]] = {}


def _class_kind(cls: type[Any]) -> tuple[str, KindDefaults | None]:
    found = _CLASS_KINDS.get(cls)
    if found is None:
        defaults = declared(cls)
        name = defaults.name if defaults is not None else None
        found = (name if name is not None else _kind_of_class_name(cls.__name__), defaults)
        if not issubclass(cls, Mapping):
            _CLASS_KINDS[cls] = found
    return found


def kind_of(args: object, kind: str | None = None) -> str:
    """The kind of a job: explicit ``kind``, else the args type's declared name, else the
    class name in snake_case."""
    if kind is not None:
        return validate_kind(kind)
    if isinstance(args, Mapping):
        raise ValidationError("dict args need an explicit kind=...: insert(args, kind='my_kind')")
    return _class_kind(args if isinstance(args, type) else type(args))[0]


def kind_of_type(args_type: type[Any] | str) -> str:
    """The kind registered for an args type, or the string itself when given a kind."""
    if isinstance(args_type, str):
        return validate_kind(args_type)
    return _class_kind(args_type)[0]


def kind_and_defaults(args: object, kind: str | None = None) -> tuple[str, KindDefaults | None]:
    """The kind of a job and the defaults its args type declares for that kind.

    An explicit ``kind`` other than the type's own makes it another kind, whose defaults
    the type does not declare; dict args declare none.
    """
    found = _CLASS_KINDS.get(type(args))
    if found is None:
        if isinstance(args, Mapping):
            if kind is None:
                raise ValidationError(
                    "dict args need an explicit kind=...: insert(args, kind='my_kind')"
                )
            return validate_kind(kind), None
        found = _class_kind(type(args))
    if kind is None or kind == found[0]:
        return found
    return validate_kind(kind), None
