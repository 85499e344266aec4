"""``settings.WAI``, validated, and the libpq conninfo of a Django database alias.

The settings are read when asked for (never at import): a project's settings
module may not be configured yet when this module is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from psycopg import conninfo, pq

from wai._sql import validate_schema
from wai.errors import ValidationError

__all__ = ["WaiSettings", "conninfo_from", "database_url", "wai_settings"]

#: The keys ``settings.WAI`` may hold, and their defaults.
_DEFAULTS: dict[str, str | None] = {"DATABASE": "default", "SCHEMA": "wai", "APP": None}

#: Keys of a Django ``OPTIONS`` dict that Django or psycopg consume, never libpq.
_NOT_LIBPQ = frozenset(
    {
        "assume_role",
        "autocommit",
        "context",
        "cursor_factory",
        "isolation_level",
        "pool",
        "prepare_threshold",
        "row_factory",
        "server_side_binding",
    }
)


@dataclass(frozen=True, slots=True)
class WaiSettings:
    """``settings.WAI`` with its defaults: which database alias, schema and APP wai uses."""

    database: str
    """The alias in ``settings.DATABASES`` whose connection jobs are inserted on."""
    schema: str
    """The schema of wai's tables (``wai`` by default)."""
    app: str | None
    """``module:attribute`` naming the ``wai.AsyncClient`` ``manage.py wai_worker`` runs."""


def wai_settings() -> WaiSettings:
    """``settings.WAI``, checked: a :class:`wai.ValidationError` says what is wrong.

    ``DATABASE`` must name a PostgreSQL entry of ``settings.DATABASES``, ``SCHEMA``
    a lower-case identifier, ``APP`` a ``module:attribute`` string (it is imported
    only by ``manage.py wai_worker``).
    """
    from django.conf import settings

    raw: object = getattr(settings, "WAI", {})
    if not isinstance(raw, Mapping):
        raise ValidationError(
            f"settings.WAI must be a dict such as {{'DATABASE': 'default', 'SCHEMA': 'wai', "
            f"'APP': 'myproject.tasks:client'}}, got {type(raw).__name__}"
        )
    given = cast("Mapping[object, object]", raw)
    unknown = sorted(str(key) for key in given if key not in _DEFAULTS)
    if unknown:
        raise ValidationError(
            f"settings.WAI has unknown keys {', '.join(unknown)}; "
            f"the keys are {', '.join(_DEFAULTS)}"
        )
    values: dict[str, str | None] = {}
    for key, default in _DEFAULTS.items():
        value = given.get(key, default)
        if value is not None and not isinstance(value, str):
            raise ValidationError(
                f"settings.WAI[{key!r}] must be a string, got {type(value).__name__} {value!r}"
            )
        values[key] = value
    database = values["DATABASE"]
    if not database:
        raise ValidationError("settings.WAI['DATABASE'] must name an alias of settings.DATABASES")
    databases = cast("Mapping[str, Any]", getattr(settings, "DATABASES", {}))
    if database not in databases:
        raise ValidationError(
            f"settings.WAI['DATABASE'] is {database!r}, which settings.DATABASES does not "
            f"define (it has {', '.join(map(repr, databases)) or 'no alias'})"
        )
    engine = str(cast("Mapping[str, Any]", databases[database]).get("ENGINE", ""))
    if "postgresql" not in engine and "postgis" not in engine:
        raise ValidationError(
            f"settings.DATABASES[{database!r}] uses ENGINE {engine!r}: wai needs PostgreSQL "
            "('django.db.backends.postgresql')"
        )
    try:
        schema = validate_schema(values["SCHEMA"] or "")
    except ValidationError as exc:
        raise ValidationError(f"settings.WAI['SCHEMA']: {exc}") from None
    app = values["APP"]
    if app is not None:
        from wai.cli._app import parse_app

        try:
            parse_app(app)
        except ValidationError as exc:
            raise ValidationError(f"settings.WAI['APP']: {exc}") from None
    return WaiSettings(database=database, schema=schema, app=app)


def database_url(using: str | None = None) -> str:
    """The libpq conninfo of the Django database ``using`` (default: ``WAI['DATABASE']``).

    Built from the alias's live settings (a test run's test database name
    included): ``NAME``, ``USER``, ``PASSWORD``, ``HOST``, ``PORT`` and the libpq
    parameters of ``OPTIONS`` (``sslmode``, ``service``...). Give it to a
    ``wai.AsyncClient`` so that the worker, the client and the inserts share one
    database.
    """
    from django.db import connections

    alias = using if using is not None else wai_settings().database
    if alias not in connections:
        raise ValidationError(f"settings.DATABASES has no alias {alias!r}")
    settings_dict = cast("Mapping[str, Any]", connections[alias].settings_dict)
    return conninfo_from(settings_dict, alias=alias)


def conninfo_from(settings_dict: Mapping[str, Any], *, alias: str = "default") -> str:
    """A ``settings.DATABASES`` entry as a libpq conninfo string (see :func:`database_url`).

    As Django connects: an empty ``NAME`` means the ``postgres`` database unless
    ``OPTIONS`` names a ``service``; an empty ``HOST`` the local Unix socket. The
    ``OPTIONS`` keys of Django or psycopg (``isolation_level``, ``pool``...) are
    left out; any other key must be a libpq parameter.
    """
    options = cast("Mapping[str, Any]", settings_dict.get("OPTIONS") or {})
    known = _libpq_keywords()
    params: dict[str, Any] = {}
    for key, value in options.items():
        if key in _NOT_LIBPQ:
            continue
        if key not in known:
            raise ValidationError(
                f"settings.DATABASES[{alias!r}]['OPTIONS'] has {key!r}, which is not a libpq "
                "connection parameter wai can pass on"
            )
        params[key] = value
    name = settings_dict.get("NAME")
    if name:
        params["dbname"] = str(name)
    elif "service" not in params:
        params["dbname"] = "postgres"
    for key, param in (("USER", "user"), ("PASSWORD", "password"), ("HOST", "host")):
        if settings_dict.get(key):
            params[param] = str(settings_dict[key])
    if settings_dict.get("PORT"):
        params["port"] = str(settings_dict["PORT"])
    return conninfo.make_conninfo(**params)


def _libpq_keywords() -> frozenset[str]:
    return frozenset(option.keyword.decode() for option in pq.Conninfo.get_defaults())
