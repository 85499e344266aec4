"""``wai demo``: a signup flow that shows, in a few seconds, what sets wai apart.

Read this file from the top: first the app (two tasks, one follow-up, one hook),
then the code that runs it and checks the result in the database.

**The app.** Four users sign up; each ``Signup`` job creates an account.

- The welcome email is a *follow-up job*, registered with
  ``client.on_completed_enqueue(Signup, ...)``. The signup handler never inserts
  it. When a signup completes, wai builds the email job from the completed signup
  and inserts it *in the same transaction* that marks the signup completed: a
  completed signup without its email, or an email without a completed signup,
  cannot exist, whenever a process crashes.
- Grace's first attempt fails (the account service is busy). A failed attempt is
  not a completion, so it enqueues no email. The handler lets the error propagate:
  the attempt is recorded with its error and retried after wai's exponential
  backoff (about 2 s after a first failure); the second attempt completes and
  enqueues her email, exactly once.
- Each email records its lineage: ``job.row.trigger`` names the signup, and the
  run lease of the attempt, whose completion enqueued it.
- An ``on_event`` hook prints the lifecycle events it sees. It only observes:
  hooks run after the commit, best-effort, and a crash can lose their events.
  They are for logs and metrics; nothing that must happen belongs in one.

**The run.** Every run drops and recreates its schema (``wai_demo``), so the jobs
of a run interrupted with Ctrl-C never run, or count, in the next one. The closing
table is read from the database; the exit status is 0 only when it shows every
signup completed with exactly one welcome email, enqueued by the completing
attempt, and none enqueued by the failed attempt.

**The web UI** (``wai demo --serve``). After the report the demo keeps its
database and leaves a few more jobs in the states the admin web UI shows: a
welcome email that bounces (failed at once, dead-lettered), a confirmation that
waits for the user's click (an external callback, the third job of a follow-up
chain) and a weekly cron schedule. Then it serves the UI on its schema, its
workers still running, until Ctrl-C.
"""

# The handlers below are registered by their decorators and never called by name.
# pyright: reportUnusedFunction=false

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import logging
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TextIO

import psycopg

import wai
from wai._sql import query
from wai.events import Completed, JobEvent, Retried, Started

__all__ = [
    "SCHEMA",
    "AccountServiceBusy",
    "ConfirmEmail",
    "Narrator",
    "SendWelcomeEmail",
    "Serve",
    "Signup",
    "WeeklyDigest",
    "add_web_ui_extras",
    "build_app",
    "problems",
    "run",
]

SCHEMA = "wai_demo"
TIMEOUT = 30.0  # seconds before the demo gives up waiting for its jobs


# -- the app ------------------------------------------------------------------------------


@dataclass
class Signup:
    """A user signed up: create their account. Its kind is ``signup``."""

    user_id: int
    email: str


@dataclass
class SendWelcomeEmail:
    """Send a new user their welcome email. Its kind is ``send_welcome_email``."""

    user_id: int
    email: str


USERS = [
    Signup(user_id=1, email="ada@example.com"),
    Signup(user_id=2, email="grace@example.com"),  # the account service is busy at first
    Signup(user_id=3, email="linus@example.com"),
    Signup(user_id=4, email="margaret@example.com"),  # signs up two seconds from now
]
FLAKY_USER = 2
LATE_USER, LATE_BY = 4, 2.0


class AccountServiceBusy(Exception):
    """The (pretend) account service could not take the request: try again later."""


async def create_account(user: Signup, attempt: int) -> None:
    """Pretend to call an account service, which is busy at Grace's first attempt."""
    await asyncio.sleep(0.3)
    if user.user_id == FLAKY_USER and attempt == 1:
        raise AccountServiceBusy("the account service timed out")


async def send_email(to: str) -> None:
    """Pretend to hand an email to a mail server, which knows no mailbox at example.invalid."""
    await asyncio.sleep(0.2)
    if to.endswith("@example.invalid"):
        # Permanent: retrying cannot help, so the job fails now (and is dead-lettered
        # where its queue has the dead-letter queue on).
        raise wai.TerminalError(f"550 5.1.1 <{to}>: no such mailbox")


def build_app(database_url: str, *, schema: str, log: Narrator) -> wai.AsyncClient:
    """The demo app: a client with two tasks, one follow-up and one hook registered."""
    client = wai.AsyncClient(database_url, schema=schema, max_connections=6)

    @client.task(Signup, queue="signup", max_attempts=3)
    async def handle_signup(job: wai.Job[Signup]) -> None:
        """Create the account. Up to three attempts (``max_attempts=3``)."""
        try:
            await create_account(job.args, job.attempt)
        except AccountServiceBusy as exc:
            log.say(job.id, "handler", f"{exc}: raising, so this attempt fails")
            # The attempt fails with this error and counts against max_attempts; wai
            # retries it after an exponential backoff (2 s, 4 s, 8 s ... plus jitter).
            # (A handler may also return wai.RetryAfter(seconds) to choose the delay.)
            raise
        log.say(job.id, "handler", f"account created for {job.args.email}")
        # No email here: returning completes the job, and the completion enqueues it.
        return None

    @client.on_completed_enqueue(Signup, name="welcome_email")
    def welcome_email(args: Signup, job: wai.JobRow) -> SendWelcomeEmail:
        """The follow-up of a completed signup: its welcome email.

        A plain function without I/O. wai calls it while it commits the signup's
        completion, and inserts the job it returns in that same transaction, with
        the signup as its trigger. Only a completion calls it: a failed attempt
        never does.
        """
        return SendWelcomeEmail(user_id=args.user_id, email=args.email)

    @client.task(SendWelcomeEmail, queue="email")
    async def handle_welcome_email(job: wai.Job[SendWelcomeEmail]) -> None:
        """Send the email: an ordinary job, with retries, rescue and the rest."""
        await send_email(job.args.email)
        trigger = job.row.trigger  # lineage: the attempt whose completion enqueued this job
        origin = f" (follow-up of signup #{trigger.job_id})" if trigger else ""
        log.say(job.id, "handler", f"welcome email sent to {job.args.email}{origin}")

    @client.on_event("*")
    async def observe(event: JobEvent) -> None:
        """Print and count every event of every kind (``"*"``)."""
        # Best-effort observation, after the commit. If this process
        # crashed, events could be lost, and nothing would be wrong: nothing depends
        # on them. Whatever must happen is a job, like the welcome email.
        log.event(event)

    return client


# -- more for the web UI (wai demo --serve) -----------------------------------------------


@dataclass
class ConfirmEmail:
    """Wait for a new user to click the link in their welcome email. Kind ``confirm_email``."""

    user_id: int
    email: str


@dataclass
class WeeklyDigest:
    """Send every user the week's digest. Its kind is ``weekly_digest``."""


MORE_USERS = [
    Signup(user_id=5, email="kim@example.invalid"),  # no such mailbox: her email bounces
    Signup(user_id=6, email="joan@example.com"),  # has not clicked her link yet
]
CONFIRM_WITHIN = 7 * 24 * 3600.0  # seconds the confirmation link stays valid


def add_web_ui_extras(client: wai.AsyncClient, log: Narrator) -> None:
    """What ``--serve`` adds to the app: a confirmation waiting for a callback, a schedule."""

    @client.on_completed_enqueue(SendWelcomeEmail, name="confirm_email")
    def confirm_email(args: SendWelcomeEmail, job: wai.JobRow) -> ConfirmEmail:
        """A sent welcome email asks the user to confirm their address."""
        return ConfirmEmail(user_id=args.user_id, email=args.email)

    @client.task(ConfirmEmail, queue="email")
    async def handle_confirm_email(job: wai.Job[ConfirmEmail]) -> wai.WaitForCallback:
        """Park until the link is clicked: the click would call complete_external(id)."""
        token = await job.register_callback(timeout=CONFIRM_WITHIN)
        log.say(job.id, "handler", f"waiting for {job.args.email} to click (callback {token.id})")
        return wai.WaitForCallback(token)

    @client.task(WeeklyDigest, queue="email")
    async def handle_weekly_digest(job: wai.Job[WeeklyDigest]) -> None:
        """Send the digest (pretend): run by the schedule, or by "trigger now" in the UI."""
        await send_email("everyone@example.com")
        log.say(job.id, "handler", "weekly digest sent")

    client.periodic("weekly_digest", "0 9 * * 1", WeeklyDigest())  # Mondays, 09:00 UTC


# -- running it ---------------------------------------------------------------------------

#: Serves the web UI until a signal, calling its argument with the UI's URL once it answers.
Serve = Callable[[Callable[[str], None]], Awaitable[None]]


async def run(
    database_url: str,
    *,
    schema: str = SCHEMA,
    out: TextIO | None = None,
    serve: Serve | None = None,
) -> int:
    """Run the demo on ``database_url``; 0 when the database proves the follow-ups right.

    With ``serve``, then leave more jobs for the web UI and serve it (see
    :func:`stage_for_web_ui`) until a signal, before returning. Raises
    ``BrokenPipeError`` once the demo has stopped cleanly, when its output was
    closed early (``wai demo | head``).
    """
    log = Narrator(out or sys.stdout)
    log.intro()
    async with fresh_schema(database_url, schema):  # held while serving too
        client = build_app(database_url, schema=schema, log=log)
        async with client:
            applied = await client.migrate()
            log.line(
                f"Schema {schema!r}: dropped and recreated for this run "
                f"(migrations {applied[0]}-{applied[-1]}).\n"
            )
            log.line(f"{'time':>6}  {'job':<4}  {'who':<8}  what")
            await client.start(
                {"signup": 4, "email": 4},
                poll_interval=0.5,
                promote_interval=0.2,  # retries and scheduled jobs become due promptly
                election_interval=0.5,  # promotion runs on the leader: elect one fast
            )
            try:
                for user in USERS:
                    late = user.user_id == LATE_USER
                    run_at = datetime.now(UTC) + timedelta(seconds=LATE_BY) if late else None
                    row = await client.insert(user, run_at=run_at)
                    when = f", scheduled {LATE_BY:g} s from now" if late else ""
                    log.say(row.id, "app", f"inserted {row.kind} for {user.email}{when}")
                watch = await watch_until_done(client, log)
                if not log.broken:
                    await log.settle(completions=2 * len(USERS))
            except asyncio.CancelledError:  # Ctrl-C
                log.line(f"\ninterrupted: the next run drops schema {schema!r}, jobs and all")
                raise
            finally:
                await client.shutdown(timeout=5)
            # The proof: what the database holds once everything has finished.
            signups = await client.list_jobs(kind="signup")
            emails = await client.list_jobs(kind="send_welcome_email")
        if log.broken:
            raise BrokenPipeError("the demo's output was closed")
        found = problems(signups, emails, torn_snapshots=watch.torn)
        if not watch.finished:
            found.insert(0, f"gave up after {TIMEOUT:g} s with jobs still unfinished")
        log.report(
            sorted(signups, key=_id),
            sorted(emails, key=_id),
            watch,
            found,
            schema,
            serving=serve is not None,
        )
        if log.broken:
            raise BrokenPipeError("the demo's output was closed")
        if serve is not None:
            await stage_for_web_ui(database_url, schema, log, serve)
    return 1 if found else 0


async def stage_for_web_ui(database_url: str, schema: str, log: Narrator, serve: Serve) -> None:
    """Leave jobs in more states for the web UI, then ``serve`` it until a signal.

    The app runs again with :func:`add_web_ui_extras` and the dead-letter queue on,
    two more users sign up, and its workers keep running while the UI is served:
    what an operator retries or triggers from the UI (with a token) runs. Their
    lines are printed once the UI is up, not while the jobs are staged.
    """
    client = build_app(database_url, schema=schema, log=log)
    add_web_ui_extras(client, log)
    jobs_log = logging.getLogger("wai.jobs")
    level = jobs_log.level
    log.quiet = True
    jobs_log.setLevel(logging.ERROR)  # the bounce's WARNING: the summary tells it
    async with client:
        await client.start(
            {"signup": 4, "email": 4}, dlq=True, poll_interval=0.5, election_interval=0.5
        )
        try:
            for user in MORE_USERS:
                await client.insert(user)
            log.staged = await wait_until_staged(client)
            log.quiet = False
            jobs_log.setLevel(level)
            await serve(log.web_ui)
        finally:
            jobs_log.setLevel(level)
            await client.shutdown(timeout=5)


@dataclass
class Staged:
    """What the web UI will show beyond the demo's own jobs (:func:`wait_until_staged`)."""

    bounced: wai.DlqEntry | None
    waiting: wai.JobRow | None
    chain: list[wai.JobRow]
    schedule: wai.Schedule | None
    retried: wai.JobRow | None


async def wait_until_staged(client: wai.AsyncClient) -> Staged:
    """Wait for the bounced email to be dead-lettered and the confirmation to wait."""
    deadline = time.monotonic() + TIMEOUT
    staged = Staged(bounced=None, waiting=None, chain=[], schedule=None, retried=None)
    while time.monotonic() < deadline:
        dead = await client.list_dlq(kind="send_welcome_email", limit=1)
        waiting = await client.list_jobs(state=wai.JobState.WAITING_EXTERNAL, limit=1)
        staged.bounced = dead[0] if dead else None
        staged.waiting = waiting[0] if waiting else None
        if staged.bounced and staged.waiting:
            break
        await asyncio.sleep(0.1)
    if staged.waiting is not None:
        staged.chain = list((await client.lineage(staged.waiting.id)).ancestors)
    staged.schedule = (await client.list_cron() or [None])[0]
    staged.retried = next((r for r in await client.list_jobs(kind="signup") if r.errors), None)
    return staged


@dataclass
class Watch:
    """What :func:`watch_until_done` saw: whether all finished, how many looks, torn ones."""

    finished: bool
    polls: int
    torn: int


async def watch_until_done(client: wai.AsyncClient, log: Narrator) -> Watch:
    """Poll the jobs table until every signup and welcome email has finished.

    Each poll is one query, so one consistent snapshot: it must always hold as many
    welcome emails as completed signups, since each email commits with its
    signup's completion. A snapshot where the counts differ would be *torn*.
    """
    watch = Watch(finished=False, polls=0, torn=0)
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and not log.broken:
        rows = await client.list_jobs(limit=100)
        watch.polls += 1
        signups = [r for r in rows if r.kind == "signup"]
        emails = [r for r in rows if r.kind == "send_welcome_email"]
        completed = sum(s.state == wai.JobState.COMPLETED for s in signups)
        if completed != len(emails):
            watch.torn += 1
        # All finished: a completed signup's email is in the same snapshot, so no
        # more work can appear.
        if len(signups) == len(USERS) and all(r.state.is_terminal for r in rows):
            watch.finished = True
            break
        await asyncio.sleep(0.1)
    return watch


@contextlib.asynccontextmanager
async def fresh_schema(database_url: str, schema: str) -> AsyncIterator[None]:
    """Hold the demo's lock on ``schema`` and give it an empty schema of that name.

    Raises :class:`wai.WaiError` when another demo runs on the schema, or when the
    schema exists and is not the demo's (neither ``wai_demo`` nor marked by an
    earlier run): the demo never drops a schema it did not make.
    """
    key = int.from_bytes(
        hashlib.blake2b(f"wai._demo.{schema}".encode(), digest_size=8).digest(), signed=True
    )
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        got = await (await conn.execute(query("demo_lock", schema), {"key": key})).fetchone()
        if not got or not got[0]:
            raise wai.WaiError(
                f"another wai demo is running on schema {schema!r} (or serving it, with "
                "--serve): let it finish, or stop it"
            )
        cur = await conn.execute(query("demo_schema_comment", schema), {"schema": schema})
        comments = [str(r[0]) for r in await cur.fetchall()]
        if comments and schema != SCHEMA and not comments[0].startswith("wai demo:"):
            raise wai.WaiError(
                f"schema {schema!r} exists and was not made by wai demo, which drops and "
                "recreates its schema at every run: pass another --schema"
            )
        await conn.execute(query("demo_schema_drop", schema))
        await conn.execute(query("demo_schema_create", schema))
        await conn.execute(query("demo_schema_mark", schema))
        yield  # the session, and so the lock, lasts as long as the run


# -- the proof ----------------------------------------------------------------------------


def problems(
    signups: Sequence[wai.JobRow], emails: Sequence[wai.JobRow], *, torn_snapshots: int = 0
) -> list[str]:
    """What is wrong with a run's final rows (empty when the demo proved its point).

    Right means: every signup completed with exactly one welcome email, whose trigger
    is that signup's completing attempt (its final run lease, outcome completed);
    some signup had a failed attempt, and no email came from one; every email was
    sent; no poll saw a torn snapshot.
    """
    found: list[str] = []
    if len(signups) != len(USERS):
        found.append(f"expected {len(USERS)} signups, found {len(signups)}")
    by_trigger: dict[int, list[wai.JobRow]] = collections.defaultdict(list)
    for email in emails:
        if email.trigger is None:
            found.append(f"welcome email #{email.id} has no trigger: it was not a follow-up")
        else:
            by_trigger[email.trigger.job_id].append(email)
    for signup in signups:
        followups = by_trigger.pop(signup.id, [])
        ids = ", ".join(f"#{e.id}" for e in followups) or "none"
        if signup.state != wai.JobState.COMPLETED:
            found.append(f"signup #{signup.id} is {signup.state}, not completed")
        if signup.state == wai.JobState.COMPLETED and len(followups) != 1:
            found.append(
                f"signup #{signup.id} completed with {len(followups)} welcome emails ({ids})"
            )
        for email in followups:
            assert email.trigger is not None
            if (email.trigger.run_lease, email.trigger.outcome) != (signup.run_lease, "completed"):
                found.append(
                    f"welcome email #{email.id} came from signup #{signup.id}'s "
                    f"{email.trigger.outcome} attempt under run lease {email.trigger.run_lease}, "
                    f"not from its completion (run lease {signup.run_lease})"
                )
    for trigger_id, orphans in sorted(by_trigger.items()):
        found.append(f"welcome emails {[e.id for e in orphans]} name unknown signup #{trigger_id}")
    if not any(s.errors for s in signups):
        found.append("no signup attempt failed: nothing showed a failed attempt enqueues no email")
    found += [f"welcome email #{e.id} is {e.state}, not sent" for e in emails if not _sent(e)]
    if torn_snapshots:
        found.append(f"{torn_snapshots} polls saw completed signups and emails disagree")
    return found


def _sent(email: wai.JobRow) -> bool:
    return email.state == wai.JobState.COMPLETED


def _id(row: wai.JobRow) -> int:
    return row.id


# -- narration ----------------------------------------------------------------------------


class Narrator:
    """The demo's output: time-stamped lines about jobs, the intro and the final report.

    The stream may close early (``wai demo | head``): then ``broken`` turns true and
    every later line is dropped. Nothing raises here, since lines are also printed
    from handlers (where an error would fail the job) and from the hook. While
    ``quiet``, the lines of handlers and of the hook are dropped (events still count).
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.began = time.monotonic()
        self.broken = False
        self.quiet = False
        self.staged: Staged | None = None  # what --serve left for the web UI
        self.events: collections.Counter[str] = collections.Counter()
        self._seen = asyncio.Event()

    def line(self, text: str = "") -> None:
        """Print one line (or several), unless the stream has closed."""
        if self.broken:
            return
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError):  # ValueError: the stream was closed
            self.broken = True

    def say(self, job_id: int, who: str, text: str) -> None:
        """One event of the run: seconds since the start, the job id, who says it."""
        if self.quiet:
            return
        self.line(f"{time.monotonic() - self.began:5.2f}s  #{job_id:<3}  {who:<8}  {text}")

    def event(self, event: JobEvent) -> None:
        """Count and print a lifecycle event received by the ``on_event`` hook."""
        name = type(event).__name__
        self.events[name] += 1
        self._seen.set()
        if self.quiet:
            return
        job = event.job
        match event:
            case Started():
                trigger = job.trigger
                origin = f", follow-up of #{trigger.job_id}" if trigger else ""
                text = f": attempt {job.attempt} of {job.max_attempts}{origin}"
            case Completed():
                text = f" in {event.duration:.2f} s"
            case Retried():
                wait = max((event.next_run_at - datetime.now(UTC)).total_seconds(), 0.0)
                error = event.error.splitlines()[0] if event.error else "an error"
                text = (
                    f": attempt {event.attempt} failed ({error}); backoff {wait:.1f} s;"
                    " no email enqueued"
                )
            case _:
                text = ""
        self.say(job.id, "on_event", f"{name} {job.kind}{text}")

    async def settle(self, *, completions: int, timeout: float = 1.0) -> None:
        """Give the hook a moment to print the last events, which arrive after commit."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while self.events["Completed"] < completions:
                    await self._seen.wait()
                    self._seen.clear()

    def intro(self) -> None:
        """What the demo is about to show."""
        self.line(
            "wai demo: follow-up jobs that commit with their trigger's outcome.\n"
            "\n"
            "  * Four users sign up; a Signup job creates each account. The welcome email\n"
            "    is a follow-up, registered with client.on_completed_enqueue(Signup, ...):\n"
            "    wai inserts it in the same transaction that marks the signup completed.\n"
            "    No completion, no email; one completion, exactly one email.\n"
            "  * Grace's first attempt fails (the account service is busy). A failed attempt\n"
            "    is not a completion: it enqueues no email. It is retried after wai's\n"
            "    exponential backoff, completes, and enqueues her email then.\n"
            "  * Each email names its trigger: the signup whose completion enqueued it.\n"
            "  * Lines marked on_event come from a hook: best-effort observation after the\n"
            "    commit, fine for logs and metrics, never for anything that must happen.\n"
            f"  * Margaret signs up {LATE_BY:g} s from now (a scheduled job).\n"
        )

    def report(
        self,
        signups: list[wai.JobRow],
        emails: list[wai.JobRow],
        watch: Watch,
        found: list[str],
        schema: str,
        *,
        serving: bool = False,
    ) -> None:
        """The closing table, read from the database, the verdict and what to try next.

        Unless ``serving`` (the web UI follows), it ends by pointing at ``--serve``.
        """
        self.line(f"\nFrom the database (schema {schema!r}):\n")
        self.line(f"  {'signup (trigger)':<55}welcome email (follow-up)")
        self.line(
            f"  {'id':>3}  {'email':<21} {'state':<10} {'attempts':<12}"
            f"  {'id':>3}  {'trigger':<26} state"
        )
        for signup in signups:
            failed = len(signup.errors)
            attempts = f"{signup.attempt}" + (f" ({failed} failed)" if failed else "")
            left = (
                f"  {signup.id:>3}  {signup.args.get('email', ''):<21} "
                f"{signup.state:<10} {attempts:<12}"
            )
            mine = [e for e in emails if e.trigger and e.trigger.job_id == signup.id]
            for n, email in enumerate(mine or [None]):
                pad = left if n == 0 else " " * len(left)
                if email is None or email.trigger is None:
                    self.line(f"{pad}  {'-':>3}")
                    continue
                t = email.trigger
                trigger = f"#{t.job_id} {t.outcome}, run lease {t.run_lease}"
                self.line(f"{pad}  {email.id:>3}  {trigger:<26} {email.state}")
        self.line()
        if found:
            self.line("Something is wrong:")
            for problem in found:
                self.line(f"  - {problem}")
        else:
            self.line(self._verdict(signups, emails, watch))
        counts = ", ".join(f"{n} {name}" for name, n in self.events.most_common())
        self.line(
            f"The on_event hook saw {sum(self.events.values())} events ({counts}):\n"
            "observation only, and nothing above depends on them."
        )
        flaky = [s for s in signups if s.errors]
        example = flaky[0].id if flaky else 1
        commands = [  # (command, what it shows)
            (f"wai jobs list --schema {schema}", "these jobs (add --database-url if you gave one)"),
            (f"wai jobs show {example} --schema {schema}", "one job in full: attempts, errors"),
            ("wai embedded status", "the embedded PostgreSQL: where it lives, its size"),
        ]
        self.line(
            "\nTry next:\n"
            f"  - the code of this demo, written to be read: {__file__}\n"
            "  - the Quickstart in README.md: your own tasks, follow-ups and hooks"
        )
        for command, what in commands:
            self.line(f"  - {command:<34} {what}")
        self.line(
            "  - docs/hooks-or-followups.md (hooks or follow-ups?), docs/handlers.md (RetryAfter\n"
            "    and the other results), docs/reliability.md (what survives a crash),\n"
            "    docs/cli.md (every command)"
        )
        if not serving:
            again = "wai demo --serve" + (f" --schema {schema}" if schema != SCHEMA else "")
            self.line(f"  - {again:<34} see it all in the admin web UI, with a few more jobs")

    def web_ui(self, url: str) -> None:
        """What ``--serve`` left for the web UI and where to look, then the UI's ``url``."""
        self.line(
            "\nFor the web UI, the app ran again with a confirmation step after the welcome\n"
            "email, the dead-letter queue on and a weekly schedule; two more users signed up.\n"
            "Pages to look at:\n"
        )
        staged = self.staged or Staged(
            bounced=None, waiting=None, chain=[], schedule=None, retried=None
        )
        if (bounced := staged.bounced) is not None:
            job = bounced.job
            error = str(job.errors[-1].get("error", "")) if job.errors else ""
            origin = f" (follow-up of signup #{job.trigger.job_id})" if job.trigger else ""
            self.line(
                f"  {'#/dlq':<10}  welcome email #{job.id} to {job.args.get('email', '')}"
                f"{origin}\n{'':14}bounced: {error.splitlines()[0] if error else 'failed'}\n"
                f"{'':14}failed at once, no retry, and dead-lettered ({bounced.reason})"
            )
        if (waiting := staged.waiting) is not None:
            chain = " -> ".join(f"{r.kind} #{r.id}" for r in [*reversed(staged.chain), waiting])
            self.line(
                f"  {f'#/jobs/{waiting.id}':<10}  {waiting.kind} #{waiting.id} waits for "
                f"{waiting.args.get('email', '')} to click (an external callback);\n"
                f"{'':14}its lineage: {chain}"
            )
        if (schedule := staged.schedule) is not None:
            at = schedule.next_fire_at
            nxt = f"{at.astimezone(UTC):%a %Y-%m-%d %H:%M} UTC" if at else "-"
            self.line(
                f"  {'#/cron':<10}  {schedule.name}: {schedule.expr} ({schedule.timezone}), "
                f"next {nxt}"
            )
        if staged.bounced is None or staged.waiting is None:
            self.line(f"  (not all of them were there after {TIMEOUT:g} s)")
        if (retried := staged.retried) is not None:
            self.line(
                f"  {f'#/jobs/{retried.id}':<10}  signup #{retried.id}: its failed attempt, "
                "then the one that completed"
            )
        self.line(f"  {'#/jobs':<10}  every job, newest first (the URL below opens the dashboard)")
        self.line(f"\nThe admin web UI, on these jobs: {url}  (Ctrl-C to stop)")

    @staticmethod
    def _verdict(signups: list[wai.JobRow], emails: list[wai.JobRow], watch: Watch) -> str:
        """The closing sentences of a run that proved its point."""
        completed = sum(s.state == wai.JobState.COMPLETED for s in signups)
        failures = [
            f"signup #{s.id}, attempt {e.get('attempt', '?')}" for s in signups for e in s.errors
        ]
        retried = [
            f"The email of signup #{s.id} names its run lease {s.run_lease}: "
            "the attempt that completed."
            for s in signups
            if s.errors
        ]
        return (
            f"{completed} signups completed -> {len(emails)} welcome emails, each enqueued in the "
            "same transaction\nas its signup's completion; "
            f"the failed attempt ({'; '.join(failures)}) enqueued none.\n"
            + "".join(f"{line}\n" for line in retried)
            + f"{watch.polls} looks at the jobs table while the demo ran: each saw exactly one "
            "welcome email\nper completed signup, never one without the other."
        )
