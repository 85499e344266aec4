"""Django, configured for the tests of this folder only, on the run's PostgreSQL server.

pytest-django is installed with the ``test`` extra, and stays inert for the rest of
the suite: it acts only once Django's settings are configured, and nothing but this
conftest configures them (no ``DJANGO_SETTINGS_MODULE``, no ``--ds``), when this
folder is collected. Its test database (``test_wai_django``, with the xdist worker
as suffix) gets wai's schema from ``manage.py wai_migrate``: the
``django_db_setup`` override below is the fixture docs/bridges/django.md tells a
project to add.
"""

from __future__ import annotations

import os
from typing import Any

import django
import pytest
from django.conf import settings
from django.core.management import call_command


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Configure Django once the run's server is known: after the root conftest's own
    ``pytest_configure``, which may start an embedded server and point PGHOST/PGPORT at
    it (this conftest is imported before that when its folder is named on the command
    line)."""
    if settings.configured:
        return
    settings.configure(
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": "wai_django",
                "HOST": os.environ.get("PGHOST", "127.0.0.1"),
                "PORT": os.environ.get("PGPORT", "5432"),
                "USER": os.environ.get("PGUSER", "postgres"),
                "PASSWORD": os.environ.get("PGPASSWORD", ""),
            },
            # not PostgreSQL: settings.WAI naming it is refused (test_conf.py)
            "lite": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"},
        },
        INSTALLED_APPS=["wai.contrib.django"],
        WAI={"DATABASE": "default", "SCHEMA": "wai"},
        USE_TZ=True,
    )
    django.setup()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> None:
    """pytest-django's test database, with wai's schema migrated into it."""
    with django_db_blocker.unblock():
        call_command("wai_migrate")
