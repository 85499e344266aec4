"""The Django app of ``INSTALLED_APPS += ["wai.contrib.django"]``: its management commands."""

from __future__ import annotations

from django.apps import AppConfig

__all__ = ["WaiConfig"]


class WaiConfig(AppConfig):
    """wai's Django app: ``manage.py wai_worker`` and ``manage.py wai_migrate``, no models."""

    name = "wai.contrib.django"
    label = "wai"
    verbose_name = "wai job queue"
