"""Resolves an ``APP`` string (``module:attribute``) to the :class:`wai.AsyncClient` it names.

:func:`parse_app` and :func:`load_app` resolve the string; :func:`load_runtime_app`
is what a command taking ``APP`` calls: it also settles the database URL and
schema with the command line, and starts the embedded server when needed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pkgutil
import re
import sys
import traceback

from wai.cli._common import UsageError, check_reachable, embedded_database_url
from wai.client import AsyncClient
from wai.errors import NoDatabaseURL, ValidationError, WaiError

__all__ = ["AppError", "AppNeedsDatabaseURL", "load_app", "load_runtime_app", "parse_app"]


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
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    # A module whose import fails is not left in sys.modules: an error raised while it
    # is there comes from looking the attribute up, not from importing the module.
    try:
        obj: object = pkgutil.resolve_name(app)
    except AttributeError:
        if module_name not in sys.modules:
            raise  # the module's own code, while importing: its error, its traceback
        raise AppError(f"module {module_name!r} has no attribute {attr!r} (APP {app!r})") from None
    except NoDatabaseURL:
        if module_name in sys.modules:
            raise  # looking the attribute up built the client: no import to run again
        raise AppNeedsDatabaseURL(
            f"importing APP {app!r} built a client without a database URL, and none is set"
            " (WAI_DATABASE_URL or DATABASE_URL)"
        ) from None
    except ModuleNotFoundError as exc:
        # Only a missing APP module (or one of its packages) is our error; a missing
        # import inside the user's module is theirs and keeps its traceback.
        missing = exc.name
        if missing is not None and (
            module_name == missing or module_name.startswith(missing + ".")
        ):
            raise AppError(
                f"cannot import module {module_name!r} of APP {app!r}: no module named {missing!r}"
                f" (searched the current directory {cwd} and sys.path)"
            ) from None
        raise
    if not isinstance(obj, AsyncClient):
        raise AppError(
            f"{app!r} is a {type(obj).__module__}.{type(obj).__qualname__}, "
            "not a wai.AsyncClient: point APP at the client your tasks are registered on"
        )
    return obj


def load_runtime_app(
    args: argparse.Namespace, stack: contextlib.ExitStack, *, offline: bool = False
) -> tuple[AsyncClient, str]:
    """Import APP's client for a command taking APP; returns it and its database URL.

    APP is imported first, with ``WAI_DATABASE_URL`` set to ``--database-url`` when
    one is given (else the environment as it is). The client's own URL and schema
    win: a ``--database-url`` or ``--schema`` that disagrees is a usage error. Only
    when APP builds a client without a URL and none is configured is the embedded
    server started and APP imported again on it. ``offline`` (``migrate --sql``)
    starts nothing and connects nowhere: :class:`AppNeedsDatabaseURL` then
    propagates.
    """
    parse_app(args.app)  # a malformed APP fails before anything is imported or started
    if args.database_url:
        # A client built at import without a URL reads WAI_DATABASE_URL: give it ours.
        os.environ["WAI_DATABASE_URL"] = args.database_url
    embedded_url: str | None = None
    try:
        client = _import_app(args.app)
    except AppNeedsDatabaseURL:
        if offline:
            raise
        embedded_url = os.environ["WAI_DATABASE_URL"] = embedded_database_url(stack)
        client = _import_app(args.app)
    if args.database_url and client.database_url != args.database_url:
        raise UsageError(f"{args.app} uses its own database URL, not the --database-url given")
    if args.schema and client.schema != args.schema:
        raise UsageError(f"{args.app} uses schema {client.schema!r}, not --schema {args.schema!r}")
    if not offline and client.database_url != embedded_url:  # embedded: checked at start
        check_reachable(client.database_url)
    return client, client.database_url


def _import_app(app: str) -> AsyncClient:
    """:func:`load_app`, an error of the module's own code shown with its traceback."""
    try:
        return load_app(app)
    except WaiError:
        raise
    except Exception:
        traceback.print_exc()
        raise WaiError(f"importing APP {app!r} failed (traceback above)") from None
