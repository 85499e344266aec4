"""Integrations of wai with other frameworks: :mod:`wai.contrib.django`."""

from __future__ import annotations
