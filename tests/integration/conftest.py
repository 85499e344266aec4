"""Fixtures shared by the integration tests (the database ones live in tests/conftest.py)."""

from __future__ import annotations

import pytest

import wai
from tests.integration._helpers import FLAVORS, Admin, admin_caller


@pytest.fixture(params=FLAVORS)
def admin(request: pytest.FixtureRequest, aclient: wai.AsyncClient, sclient: wai.Client) -> Admin:
    """``await admin("cancel", job_id)`` on the async client, or the sync one in a thread."""
    return admin_caller(request.param, aclient, sclient)
