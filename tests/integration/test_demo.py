"""``wai._demo.run`` in this process: its exit status follows what the database holds."""

from __future__ import annotations

import io
from typing import Any

import pytest

from wai import _demo as demo
from wai.client import AsyncClient
from wai.errors import WaiError

pytestmark = pytest.mark.slow


async def test_demo_run_fails_when_a_failed_attempt_enqueues_an_email(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_build_app = demo.build_app

    def wrong_app(url: str, *, schema: str, log: demo.Narrator) -> AsyncClient:
        client = real_build_app(url, schema=schema, log=log)

        # The pattern the demo argues against: an email on a failed attempt too.
        @client.on_retried_enqueue(demo.Signup)
        def email_on_retry(args: demo.Signup, *_: Any) -> demo.SendWelcomeEmail:
            return demo.SendWelcomeEmail(user_id=args.user_id, email=args.email)

        return client

    monkeypatch.setattr(demo, "build_app", wrong_app)
    out = io.StringIO()
    assert await demo.run(database_url, out=out) == 1
    text = out.getvalue()
    assert "Something is wrong:" in text
    assert "signup #2 completed with 2 welcome emails" in text
    assert "came from signup #2's retried attempt under run lease 1" in text
    assert "4 signups completed -> 4 welcome emails" not in text


async def test_demo_run_refuses_while_another_demo_holds_the_schema(database_url: str) -> None:
    async with demo.fresh_schema(database_url, "held_demo"):
        with pytest.raises(WaiError, match="another wai demo is running"):
            await demo.run(database_url, schema="held_demo", out=io.StringIO())
