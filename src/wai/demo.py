"""``wai demo``: a signup flow run end to end, narrating each job as it moves.

Four ``Signup`` jobs are inserted (one scheduled two seconds ahead). The signup
handler creates the account and inserts a ``SendWelcomeEmail`` job; the first
attempt at Grace's email fails and is retried after the default backoff. A
watcher polls the database and prints every state change; the demo stops when all
of this run's jobs are finished and prints their final states from the database.

Each run tags its jobs with a run id and works in its own schema (``wai_demo``
by default), so earlier runs never clutter the summary.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TextIO

from wai.client import AsyncClient
from wai.context import Job
from wai.job import JobRow, JobState

__all__ = ["SCHEMA", "SendWelcomeEmail", "Signup", "build_client", "run"]

SCHEMA = "wai_demo"
TIMEOUT = 30.0  # seconds before the demo gives up waiting for its jobs

_USERS = [
    (1, "ada@example.com", 0.0),
    (2, "grace@example.com", 0.0),  # her first welcome email fails once
    (3, "linus@example.com", 0.0),
    (4, "margaret@example.com", 2.0),  # signs up two seconds from now
]
_FLAKY_USER = 2
_TERMINAL = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED})


@dataclass
class Signup:
    """A user signed up: create their account."""

    user_id: int
    email: str


@dataclass
class SendWelcomeEmail:
    """Send the welcome email of a new user."""

    user_id: int
    email: str


Say = Callable[[str, int], None]  # (text, job id)


def build_client(database_url: str, *, schema: str, tag: str, say: Say) -> AsyncClient:
    """The demo app: a client with the signup and email tasks registered."""
    client = AsyncClient(database_url, schema=schema, max_connections=6)

    @client.task(Signup, queue="signup")
    async def handle_signup(job: Job[Signup]) -> None:  # pyright: ignore[reportUnusedFunction]
        await asyncio.sleep(0.4)  # pretend to create the account
        email = await client.insert(
            SendWelcomeEmail(user_id=job.args.user_id, email=job.args.email), tags=[tag]
        )
        say(f"account created for {job.args.email}; queued welcome email #{email.id}", job.id)

    @client.task(SendWelcomeEmail, queue="email")
    async def send_welcome_email(job: Job[SendWelcomeEmail]) -> None:  # pyright: ignore[reportUnusedFunction]
        await asyncio.sleep(0.3)  # pretend to talk to the mail server
        if job.args.user_id == _FLAKY_USER and job.attempt == 1:
            raise ConnectionError("SMTP server timed out")
        say(f"welcome email delivered to {job.args.email}", job.id)

    return client


async def run(database_url: str, *, schema: str = SCHEMA, out: TextIO | None = None) -> int:
    """Run the demo against ``database_url``; returns 0 when every job completed."""
    stream = out or sys.stdout
    began = time.monotonic()
    tag = f"demo-{uuid.uuid4().hex[:8]}"

    def say(text: str, job_id: int) -> None:
        stream.write(f"{time.monotonic() - began:6.2f}s  #{job_id:<4} {text}\n")
        stream.flush()

    client = build_client(database_url, schema=schema, tag=tag, say=say)
    async with client:
        applied = await client.migrate()
        stream.write(f"wai demo: schema {schema!r}, run {tag}")
        stream.write(f" (applied migrations {applied})\n" if applied else "\n")
        await client.start(
            {"signup": 4, "email": 4},
            poll_interval=0.5,
            promote_interval=0.2,
            election_interval=0.5,
        )
        try:
            for user_id, email, delay in _USERS:
                run_at = datetime.now(UTC) + timedelta(seconds=delay) if delay else None
                row = await client.insert(
                    Signup(user_id=user_id, email=email), run_at=run_at, tags=[tag]
                )
                when = f", scheduled in {delay:g}s" if delay else ""
                say(f"inserted {row.kind} for {email} on queue {row.queue!r}{when}", row.id)
            finished = await _watch(client, tag, say, expected=2 * len(_USERS))
        finally:
            await client.shutdown(timeout=5)
        rows = sorted(await client.list_jobs(tag=tag, limit=100), key=lambda r: r.id)
    _summary(rows, stream, schema)
    if not finished:
        stream.write(f"wai demo: gave up after {TIMEOUT:g}s with jobs still pending\n")
        return 1
    return 0 if all(r.state == JobState.COMPLETED for r in rows) else 1


async def _watch(client: AsyncClient, tag: str, say: Say, *, expected: int) -> bool:
    """Print state changes of this run's jobs until ``expected`` of them are finished."""
    seen: dict[int, JobRow] = {}
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        rows = await client.list_jobs(tag=tag, limit=100)
        for row in sorted(rows, key=lambda r: r.id):
            # First sighting: compare with the job as it was inserted.
            before = seen.get(row.id) or _as_inserted(row)
            seen[row.id] = row
            _narrate(before, row, say)
        done = [r for r in seen.values() if r.state in _TERMINAL]
        if len(done) >= expected:
            return True
        await asyncio.sleep(0.05)
    return False


def _as_inserted(row: JobRow) -> JobRow:
    state = JobState.SCHEDULED if row.state == JobState.SCHEDULED else JobState.AVAILABLE
    return dataclasses.replace(row, state=state, attempt=0)


def _narrate(before: JobRow, row: JobRow, say: Say) -> None:
    """Say what happened between two snapshots of one job."""
    if before.state == row.state and before.attempt == row.attempt:
        return
    if before.state in (JobState.SCHEDULED, JobState.RETRYABLE):
        say(f"promoted {row.kind}: {before.state} -> available (due)", row.id)
    if row.state == JobState.RUNNING or row.attempt > before.attempt:
        say(f"started {row.kind}, attempt {row.attempt} of {row.max_attempts}", row.id)
    if row.state == JobState.RETRYABLE:
        error = str(row.errors[-1]["error"]).splitlines()[0] if row.errors else "unknown error"
        wait = (row.run_at - datetime.now(UTC)).total_seconds()
        say(f"attempt {row.attempt} failed ({error}); retry with backoff in {wait:.1f}s", row.id)
    elif row.state in _TERMINAL:
        say(f"{row.state} {row.kind}", row.id)


def _summary(rows: list[JobRow], stream: TextIO, schema: str) -> None:
    stream.write(f"\nSummary of this run (from the database, schema {schema!r}):\n")
    stream.write(f"  {'id':>4}  {'kind':<20} {'queue':<8} {'state':<10} attempts  email\n")
    for r in rows:
        email = r.args.get("email", "")
        stream.write(
            f"  {r.id:>4}  {r.kind:<20} {r.queue:<8} {r.state:<10} {r.attempt:>8}  {email}\n"
        )
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.state] = counts.get(r.state, 0) + 1
    states = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    stream.write(f"  {len(rows)} jobs: {states}\n")
