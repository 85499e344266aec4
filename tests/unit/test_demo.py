"""The verdict of ``wai demo``: which final rows prove one follow-up per completion."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from wai._demo import problems
from wai._job import JobRow, JobState, Trigger

NOW = datetime(2026, 5, 1, tzinfo=UTC)


def row(job_id: int, kind: str, **fields: object) -> JobRow:
    base = JobRow(
        id=job_id,
        kind=kind,
        queue="q",
        args={},
        state=JobState.COMPLETED,
        priority=2,
        attempt=1,
        max_attempts=3,
        run_at=NOW,
        attempted_at=NOW,
        heartbeat_at=None,
        deadline_at=None,
        finalized_at=NOW,
        created_at=NOW,
        errors=(),
        metadata={},
        tags=(),
        unique_key=None,
        ordering_key=None,
        callback_id=None,
        callback_timeout_at=None,
        run_lease=1,
        progress=None,
        trigger=None,
    )
    return dataclasses.replace(base, **fields)  # pyright: ignore[reportArgumentType]


def email(job_id: int, signup: int, lease: int = 1, outcome: str = "completed") -> JobRow:
    trigger = Trigger(job_id=signup, run_lease=lease, outcome=outcome, spec="welcome_email")
    return row(job_id, "send_welcome_email", trigger=trigger)


def good_run() -> tuple[list[JobRow], list[JobRow]]:
    failed = ({"attempt": 1, "error": "RetryAfter(1s) requested by handler"},)
    signups = [
        row(1, "signup"),
        row(2, "signup", attempt=2, run_lease=2, errors=failed),
        row(3, "signup"),
        row(4, "signup"),
    ]
    emails = [email(5, 1), email(6, 3), email(7, 2, lease=2), email(8, 4)]
    return signups, emails


def test_demo_problems_none_for_one_email_per_completion() -> None:
    signups, emails = good_run()
    assert problems(signups, emails) == []


def test_demo_problems_an_email_from_the_failed_attempt() -> None:
    signups, emails = good_run()
    found = problems(signups, [*emails, email(9, 2, lease=1, outcome="retried")])
    assert found == [
        "signup #2 completed with 2 welcome emails (#7, #9)",
        "welcome email #9 came from signup #2's retried attempt under run lease 1, "
        "not from its completion (run lease 2)",
    ]


def test_demo_problems_a_completion_without_its_email_or_with_two() -> None:
    signups, emails = good_run()
    assert problems(signups, emails[1:]) == ["signup #1 completed with 0 welcome emails (none)"]
    assert problems(signups, [*emails, email(9, 3)]) == [
        "signup #3 completed with 2 welcome emails (#6, #9)"
    ]


def test_demo_problems_unfinished_jobs_and_strangers() -> None:
    signups, emails = good_run()
    signups[3] = dataclasses.replace(signups[3], state=JobState.RETRYABLE)
    emails[0] = dataclasses.replace(emails[0], state=JobState.RUNNING)
    stranger = row(9, "send_welcome_email")
    orphan = email(10, 42)
    found = problems(signups, [*emails, stranger, orphan], torn_snapshots=2)
    assert found == [
        "welcome email #9 has no trigger: it was not a follow-up",
        "signup #4 is retryable, not completed",
        "welcome emails [10] name unknown signup #42",
        "welcome email #5 is running, not sent",
        "2 polls saw completed signups and emails disagree",
    ]


def test_demo_problems_a_run_without_a_failed_attempt() -> None:
    signups, emails = good_run()
    signups[1] = dataclasses.replace(signups[1], errors=())
    assert problems(signups, emails) == [
        "no signup attempt failed: nothing showed a failed attempt enqueues no email"
    ]
    assert problems(signups[:3], emails[:3]) == [
        "expected 4 signups, found 3",
        "no signup attempt failed: nothing showed a failed attempt enqueues no email",
    ]
