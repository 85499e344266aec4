"""The JSON body of a callback request, checked per action before anything touches the database."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from wai._kinds import dumps
from wai.callbacks._models import check_error, check_timeout
from wai.errors import ValidationError

__all__ = ["FIELDS", "CallbackBody", "parse_body"]

#: The fields each action's JSON object may carry; ``required`` ones must be present.
FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "complete": (frozenset({"payload"}), frozenset()),
    "resume": (frozenset({"payload"}), frozenset()),
    "fail": (frozenset({"error"}), frozenset({"error"})),
    "heartbeat": (frozenset({"timeout"}), frozenset({"timeout"})),
    "retry": (frozenset(), frozenset()),
}


@dataclass(frozen=True, slots=True)
class CallbackBody:
    """A checked request body: the arguments of the resolution method of ``action``."""

    action: str
    payload: Any = None
    error: str = ""
    timeout: float = 0.0


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _load(body: bytes) -> object:
    try:
        # NaN and Infinity are Python's extensions, not JSON (and jsonb refuses them).
        return json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise ValidationError("the body is not UTF-8") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        raise ValidationError(f"the body is not valid JSON: {exc}") from None


def parse_body(action: str, body: bytes) -> CallbackBody:
    """Check ``body`` (a JSON object) for ``action``; raises :class:`wai.ValidationError`.

    complete and resume take an optional ``payload`` (any JSON), fail a required
    string ``error``, heartbeat a required ``timeout`` in seconds (> 0), retry
    nothing (``{}``). Unknown fields are rejected.
    """
    data = _load(body)
    if not isinstance(data, dict):
        raise ValidationError(f"the body must be a JSON object, got {type(data).__name__}")
    allowed, required = FIELDS[action]
    fields: dict[str, Any] = data  # pyright: ignore[reportUnknownVariableType]
    unknown = sorted(set(fields) - allowed)
    if unknown:
        accepted = ", ".join(sorted(allowed)) or "none"
        raise ValidationError(f"unknown field {unknown[0]!r} for {action} (accepted: {accepted})")
    missing = sorted(required - set(fields))
    if missing:
        raise ValidationError(f"{action} needs the field {missing[0]!r}")
    if action == "fail":
        return CallbackBody(action, error=check_error(fields["error"]))
    if action == "heartbeat":
        return CallbackBody(action, timeout=check_timeout(fields["timeout"]))
    payload = fields.get("payload")
    dumps(payload, "payload")  # jsonb's limits (NUL, lone surrogates): a 400, not a 500
    return CallbackBody(action, payload=payload)
