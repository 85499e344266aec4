"""Caller-owned completion (SPEC §9): ``@client.task(Args, completion="caller")`` handlers
complete their job with ``job.complete_in(tx)`` in the transaction that writes their
rows: both commit or neither; a stale attempt raises and aborts that transaction; the
worker writes no second outcome; a crash after the commit loses nothing and reruns
nothing."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import wai
from tests.integration._helpers import count, fetch, serving, wait_for, wait_job


@dataclass
class Order:
    n: int


@dataclass
class Receipt:
    n: int


async def orders_table(client: wai.AsyncClient) -> None:
    async with client.transaction() as tx:
        await tx.execute("CREATE TABLE IF NOT EXISTS public.orders (n int, job_id bigint)")
        await tx.execute("TRUNCATE public.orders")


async def orders(client: wai.AsyncClient) -> list[tuple[int, int]]:
    return await fetch(client, "SELECT n, job_id FROM public.orders ORDER BY n")  # type: ignore[return-value]


async def updates_counted(client: wai.AsyncClient) -> None:
    """Count every UPDATE of a job row (claim, completion...) in public.job_updates."""
    async with client.transaction() as tx:
        await tx.execute("CREATE TABLE IF NOT EXISTS public.job_updates (id bigint, state text)")
        await tx.execute("TRUNCATE public.job_updates")
        await tx.execute(
            "CREATE OR REPLACE FUNCTION public.count_job_update() RETURNS trigger AS $$ "
            "BEGIN INSERT INTO public.job_updates VALUES (NEW.id, NEW.state::text); "
            "RETURN NEW; END $$ LANGUAGE plpgsql"
        )
        await tx.execute("DROP TRIGGER IF EXISTS count_update ON wai.jobs")
        await tx.execute(
            "CREATE TRIGGER count_update AFTER UPDATE ON wai.jobs "
            "FOR EACH ROW EXECUTE FUNCTION public.count_job_update()"
        )


async def test_the_completion_commits_with_the_handlers_rows_and_once(
    aclient: wai.AsyncClient,
) -> None:
    await orders_table(aclient)
    await updates_counted(aclient)
    events: list[str] = []

    @aclient.task(Order, queue="q", completion="caller")
    async def order(job: wai.Job[Order]) -> None:
        async with aclient.transaction() as tx:
            await tx.execute("INSERT INTO public.orders VALUES (%s, %s)", (job.args.n, job.id))
            await tx.insert(Receipt(n=job.args.n))  # its follow-up, in the same transaction
            await job.complete_in(tx)

    @aclient.task(Receipt, queue="q")
    async def receipt(job: wai.Job[Receipt]) -> None:
        return None

    aclient.on_event(Order, lambda event: events.append(type(event).__name__))
    async with serving(aclient):
        row = await aclient.insert(Order(n=1))
        done = await wait_job(aclient, row.id, "completed")
        await wait_for(lambda: "Completed" in events or None, 5, what="the completed hook")
        runtime = aclient._runtime  # pyright: ignore[reportPrivateUsage]
        assert runtime is not None
        await wait_for(lambda: not runtime.attempts or None, 5, what="the attempt settled")
    assert await orders(aclient) == [(1, row.id)]
    assert done.attempt == 1
    assert done.errors == ()
    assert events == ["Started", "Completed"]
    # the claim, then the handler's completion: the worker wrote nothing after it
    states = await fetch(aclient, "SELECT state FROM public.job_updates WHERE id = %s", (row.id,))
    assert [s for (s,) in states] == ["running", "completed"]
    assert await count(aclient, "kind = 'receipt'") == 1


async def test_a_rolled_back_transaction_completes_nothing_and_the_job_runs_again(
    aclient: wai.AsyncClient,
) -> None:
    await orders_table(aclient)

    @aclient.task(Order, queue="q", completion="caller", max_attempts=3)
    async def order(job: wai.Job[Order]) -> wai.RetryAfter | None:
        async with aclient.transaction() as tx:
            await tx.execute("INSERT INTO public.orders VALUES (%s, %s)", (job.attempt, job.id))
            await job.complete_in(tx)
            if job.attempt == 1:
                raise RuntimeError("payment gateway said no")  # rolls back both
        return None

    async with serving(aclient):
        row = await aclient.insert(Order(n=1))
        done = await wait_job(aclient, row.id, "completed", timeout=15)
    assert await orders(aclient) == [(2, row.id)]  # only the second attempt's row
    assert done.attempt == 2
    (error,) = done.errors
    assert "payment gateway said no" in error["error"]


async def test_a_stale_attempt_raises_and_its_transaction_commits_nothing(
    aclient: wai.AsyncClient,
) -> None:
    await orders_table(aclient)
    raised: list[BaseException] = []

    @aclient.task(Order, queue="q", completion="caller", max_attempts=1)
    async def order(job: wai.Job[Order]) -> None:
        # the attempt loses its lease meanwhile (as a rescue would give the job a new one)
        async with aclient.transaction() as other:
            await other.execute(
                "UPDATE wai.jobs SET run_lease = run_lease + 1 WHERE id = %s", (job.id,)
            )
        try:
            async with aclient.transaction() as tx:
                await tx.execute("INSERT INTO public.orders VALUES (%s, %s)", (1, job.id))
                await job.complete_in(tx)
        except wai.StaleAttempt as exc:
            raised.append(exc)
            raise

    async with serving(aclient):
        row = await aclient.insert(Order(n=1))
        await wait_for(lambda: raised or None, 5, what="the stale completion")
    assert await orders(aclient) == []
    assert "no longer live" in str(raised[0])
    after = await aclient.get_job(row.id)
    assert after.state == "running"  # the new lease's holder owns it; nothing was written


async def test_a_handler_that_never_completes_fails_its_attempt(
    aclient: wai.AsyncClient,
) -> None:
    @aclient.task(Order, queue="q", completion="caller", max_attempts=1)
    async def order(job: wai.Job[Order]) -> None:
        return None

    async with serving(aclient):
        row = await aclient.insert(Order(n=1))
        failed = await wait_job(aclient, row.id, "failed")
    assert "returned without completing the job" in failed.errors[0]["error"]


async def test_a_def_handler_completes_in_a_sync_transaction(
    aclient: wai.AsyncClient, sclient: wai.Client
) -> None:
    await orders_table(aclient)

    @aclient.task(Order, queue="q", completion="caller")
    def order(job: wai.Job[Order]) -> None:
        with sclient.transaction() as tx:
            tx.execute("INSERT INTO public.orders VALUES (%s, %s)", (job.args.n, job.id))
            job.complete_in_sync(tx)

    async with serving(aclient):
        row = await aclient.insert(Order(n=5))
        await wait_job(aclient, row.id, "completed")
    assert await orders(aclient) == [(5, row.id)]


async def test_completion_caller_and_on_completed_enqueue_exclude_each_other(
    aclient: wai.AsyncClient, sclient: wai.Client
) -> None:
    @aclient.task(Order, queue="q", completion="caller")
    async def order(job: wai.Job[Order]) -> None:
        return None

    with pytest.raises(wai.ValidationError, match="completion='caller'"):
        aclient.on_completed_enqueue(Order, lambda args, job: Receipt(n=args.n))
    aclient.on_exhausted_enqueue(Order, lambda args, job, error, attempt: Receipt(n=args.n))

    sclient.on_completed_enqueue(Receipt, lambda args, job: Order(n=args.n))
    with pytest.raises(wai.ValidationError, match="on_completed_enqueue"):

        @sclient.task(Receipt, queue="q", completion="caller")
        def receipt(job: wai.Job[Receipt]) -> None:
            return None

    with pytest.raises(wai.ValidationError, match="completion must be"):

        @sclient.task("other", completion="later")  # type: ignore[arg-type]
        def other(job: wai.Job[object]) -> None:
            return None


async def test_complete_in_for_a_worker_completed_kind_is_refused(
    aclient: wai.AsyncClient,
) -> None:
    refused: list[BaseException] = []

    @aclient.task(Order, queue="q")
    async def order(job: wai.Job[Order]) -> None:
        async with aclient.transaction() as tx:
            try:
                await job.complete_in(tx)
            except wai.ValidationError as exc:
                refused.append(exc)

    async with serving(aclient):
        row = await aclient.insert(Order(n=1))
        await wait_job(aclient, row.id, "completed")
    assert "completion='caller'" in str(refused[0])


CRASHING = textwrap.dedent(
    """
    import asyncio, sys
    from dataclasses import dataclass
    import wai

    @dataclass
    class Order:
        n: int

    async def main() -> None:
        client = wai.AsyncClient(sys.argv[1])

        @client.task(Order, queue="q", completion="caller")
        async def order(job: wai.Job[Order]) -> None:
            async with client.transaction() as tx:
                await tx.execute("INSERT INTO public.orders VALUES (%s, %s)", (job.args.n, job.id))
                await job.complete_in(tx)
            await asyncio.sleep(600)  # committed: killed here, before the worker notices

        async with client:
            await client.run({"q": 1}, poll_interval=0.1, heartbeat_interval=0.2,
                             heartbeat_staleness=0.6, election_interval=0.2)

    asyncio.run(main())
    """
)


async def test_a_crash_between_the_commit_and_the_worker_noticing_loses_and_reruns_nothing(
    aclient: wai.AsyncClient, database_url: str, tmp_path: Path
) -> None:
    await orders_table(aclient)
    script = tmp_path / "crashing.py"
    script.write_text(CRASHING)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), database_url, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        row = await aclient.insert({"n": 7}, kind="order", queue="q")
        await wait_job(aclient, row.id, "completed", timeout=20)
        proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), 10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

    ran: list[int] = []

    @aclient.task(Order, queue="q", completion="caller")
    async def order(job: wai.Job[Order]) -> None:
        ran.append(job.id)

    # another worker with maintenance: rescue runs often and finds nothing to rescue
    async with serving(aclient, {"q": 1}, rescue_interval=0.1):
        await asyncio.sleep(1.5)
    after = await aclient.get_job(row.id)
    assert (after.state, after.attempt, after.errors) == ("completed", 1, ())
    assert await orders(aclient) == [(7, row.id)]
    assert ran == []
