"""The wai fixtures serve this app's tasks: wai_client gets a copy of its registry."""

import pytest
import wai

from myapp import SENT, client


@pytest.fixture
def wai_app() -> wai.AsyncClient:
    return client


@pytest.fixture(autouse=True)
def no_mail_sent() -> None:
    SENT.clear()
