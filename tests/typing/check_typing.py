# pyright: strict, reportUnnecessaryTypeIgnoreComment=true
"""Static typing checks of the public registration API, run by ``scripts/check``.

Never imported nor collected by pytest: basedpyright checks this file. The code
in the functions below must type-check as written; each line marked with
``# pyright: ignore[rule]`` must raise exactly that error, and
``reportUnnecessaryTypeIgnoreComment`` fails the check when one stops doing so,
i.e. when a signature got looser than intended.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, assert_type

import wai


@dataclass
class Signup:
    user_id: int


@dataclass
class Email:
    user_id: int


async def check_async(client: wai.AsyncClient, signup: wai.Job[Signup]) -> None:
    @client.task(Signup)
    async def handle(job: wai.Job[Signup]) -> None:
        assert_type(job.args, Signup)
        assert_type(job.args.user_id, int)

    @client.task(Signup)
    def handle_sync(job: wai.Job[Signup]) -> int:
        return job.args.user_id

    await handle(signup)  # a decorated handler keeps its own type
    assert_type(handle_sync(signup), int)

    @client.task("raw_kind")
    async def handle_raw(job: wai.Job[Any]) -> None:
        pass

    @client.task(Signup)  # pyright: ignore[reportArgumentType]
    async def wrong_args(job: wai.Job[Email]) -> None:
        pass

    @client.task(Signup)  # pyright: ignore[reportArgumentType]
    async def no_job() -> None:
        pass

    client.on_completed_enqueue(Signup, lambda args, job: Email(args.user_id))
    client.on_completed_enqueue("raw_kind", lambda args, job: Email(args["user_id"]))
    client.on_completed_enqueue_with(
        Signup, lambda args, job: wai.EnqueueRequest(Email(args.user_id))
    )
    client.on_retried_enqueue(
        Signup, lambda args, job, error, attempt, next_run_at: Email(args.user_id)
    )
    client.on_exhausted_enqueue(Signup, lambda args, job, error, attempt: Email(attempt))
    client.on_cancelled_enqueue(Signup, lambda args, job, reason: Email(len(reason)))
    client.on_rescued_enqueue(Signup, lambda args, job, reason: Email(args.user_id))

    @client.on_exhausted_enqueue(Signup)
    def after_exhausted(args: Signup, job: wai.JobRow, error: str, attempt: int) -> Email:
        return Email(args.user_id)

    @client.on_retried_enqueue(Signup)
    def after_retry(
        args: Signup, job: wai.JobRow, error: str, attempt: int, next_run_at: datetime
    ) -> Email:
        return Email(args.user_id)

    @client.on_rescued_enqueue(Signup)
    def after_rescue(args: Signup, job: wai.JobRow, reason: wai.RescueReason) -> None:
        pass

    # args of the registered type, not another
    client.on_completed_enqueue(Signup, lambda args, job: Email(args.email))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownArgumentType]

    def for_email(args: Email, job: wai.JobRow) -> Email:
        return args

    client.on_completed_enqueue(Signup, for_email)  # pyright: ignore[reportCallIssue, reportArgumentType]
    # each outcome's argument list
    client.on_exhausted_enqueue(Signup, lambda args, job: Email(1))  # pyright: ignore[reportCallIssue, reportArgumentType]
    client.on_completed_enqueue(Signup, lambda args, job, error: Email(1))  # pyright: ignore[reportCallIssue, reportArgumentType, reportUnknownLambdaType]

    @client.on_cancelled_enqueue(Signup)  # pyright: ignore[reportArgumentType]
    def bad_reason(args: Signup, job: wai.JobRow, reason: int) -> None:
        pass


def check_sync(client: wai.Client) -> None:
    @client.task(Signup)
    def handle(job: wai.Job[Signup]) -> None:
        assert_type(job.args.user_id, int)

    @client.task(Signup)  # pyright: ignore[reportArgumentType]
    def wrong_args(job: wai.Job[Email]) -> None:
        pass

    client.on_completed_enqueue(Signup, lambda args, job: Email(args.user_id))
    client.on_completed_enqueue(Signup, lambda args, job: Email(args.email))  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownArgumentType]
