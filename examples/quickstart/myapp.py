"""A wai app: one task. `python myapp.py` migrates, inserts a job and works until Ctrl-C."""

import asyncio
from dataclasses import dataclass

import wai


@wai.kind(queue="signup", max_attempts=10, deadline=30)  # kind "signup", whoever inserts it
@dataclass
class Signup:
    user_id: int


client = wai.AsyncClient()  # the URL from WAI_DATABASE_URL (or DATABASE_URL)


@client.task(Signup)  # the queue, attempts and deadline come from the args type
async def handle_signup(job: wai.Job[Signup]) -> None:
    print("welcome", job.args.user_id)


async def main() -> None:
    async with client:
        await client.migrate()
        await client.insert(Signup(user_id=7))  # goes to the kind's queue, "signup"
        await client.run({"signup": 10})  # until SIGTERM / SIGINT


if __name__ == "__main__":
    asyncio.run(main())
