"""wai in a Django project: jobs inserted in Django's transactions, and management commands.

Add ``"wai.contrib.django"`` to ``INSTALLED_APPS`` and configure::

    WAI = {"DATABASE": "default", "SCHEMA": "wai", "APP": "myproject.tasks:client"}

:func:`insert_job` inserts on Django's connection of ``WAI["DATABASE"]``, in its
current transaction (``transaction.atomic()``); ``manage.py wai_migrate`` applies
wai's migrations to that database and ``manage.py wai_worker`` runs the worker of
``WAI["APP"]`` on it. The app defines no Django models: wai's tables live in their
own schema, outside Django's migrations. See docs/bridges/django.md.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("django") is None:  # pragma: no cover - the test extra has it
    raise ImportError("wai.contrib.django needs Django: pip install 'wai[django]'")

from wai.contrib.django._conf import WaiSettings, database_url, wai_settings
from wai.contrib.django._insert import insert_job

__all__ = ["WaiSettings", "database_url", "insert_job", "wai_settings"]
