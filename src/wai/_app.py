"""Resolves an ``APP`` string (``module:attribute``) to the :class:`wai.AsyncClient` it names."""

from __future__ import annotations

import importlib
import os
import re
import sys
from types import ModuleType

from wai.client import AsyncClient
from wai.errors import NoDatabaseURL, ValidationError

__all__ = ["AppError", "AppNeedsDatabaseURL", "load_app", "parse_app"]


_APP = re.compile(
    r"^(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<attr>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)$"
)


class AppError(ValidationError):
    """The APP string is malformed, or does not name an :class:`wai.AsyncClient`."""


class AppNeedsDatabaseURL(AppError):
    """Importing APP built a client without a URL while none is configured.

    The module was not left in ``sys.modules``: once ``WAI_DATABASE_URL`` is set,
    :func:`load_app` can import it again.
    """


def parse_app(app: str) -> tuple[str, str]:
    """Split ``module:attribute`` without importing anything; raises :class:`AppError`."""
    match = _APP.match(app)
    if match is None:
        raise AppError(
            f"APP must be 'module:attribute' naming a wai.AsyncClient, e.g. 'myapp.tasks:client';"
            f" got {app!r}"
        )
    return match["module"], match["attr"]


def load_app(app: str) -> AsyncClient:
    """Import ``module:attribute`` (the current directory first on ``sys.path``).

    The attribute may be dotted (``pkg.tasks:registry.client``). Raises
    :class:`AppError` when the string is malformed, the module or attribute is
    missing, or the object is not an ``AsyncClient``; :class:`AppNeedsDatabaseURL`
    when the module builds a client with no URL and neither ``WAI_DATABASE_URL`` nor
    ``DATABASE_URL`` is set. Other errors raised by the module's own code while
    importing propagate unchanged.
    """
    module_name, attr = parse_app(app)
    try:
        obj: object = _import(module_name, app)
    except NoDatabaseURL:
        raise AppNeedsDatabaseURL(
            f"importing APP {app!r} built a client without a database URL, and none is set"
            " (WAI_DATABASE_URL or DATABASE_URL)"
        ) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise AppError(
                f"module {module_name!r} has no attribute {attr!r} (APP {app!r})"
            ) from None
    if not isinstance(obj, AsyncClient):
        raise AppError(
            f"{app!r} is a {type(obj).__module__}.{type(obj).__qualname__}, "
            "not a wai.AsyncClient: point APP at the client your tasks are registered on"
        )
    return obj


def _import(name: str, app: str) -> ModuleType:
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        # Only a missing APP module (or one of its packages) is our error; a missing
        # import inside the user's module is theirs and keeps its traceback.
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise AppError(
                f"cannot import module {name!r} of APP {app!r}: no module named {exc.name!r}"
                f" (searched the current directory {cwd} and sys.path)"
            ) from None
        raise
