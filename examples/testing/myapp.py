"""A wai app with a follow-up: a completed signup enqueues its welcome email."""

from dataclasses import dataclass

import wai


@wai.kind(queue="signup")
@dataclass
class Signup:
    user_id: int
    email: str


@wai.kind(queue="mail")
@dataclass
class SendWelcome:
    email: str


client = wai.AsyncClient()  # WAI_DATABASE_URL; the tests never open this client

SENT: list[str] = []  # stands in for the mail server


@client.task(Signup)
async def handle_signup(job: wai.Job[Signup]) -> None:
    if "@" not in job.args.email:
        raise wai.TerminalError(f"invalid email {job.args.email!r}")


@client.task(SendWelcome)
async def send_welcome(job: wai.Job[SendWelcome]) -> None:
    SENT.append(job.args.email)


# Committed with the signup's outcome, in the same transaction.
client.on_completed_enqueue(Signup, lambda args, job: SendWelcome(email=args.email))
