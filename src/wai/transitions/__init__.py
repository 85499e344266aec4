"""Every transition that ends or closes an attempt, and what commits with it.

One place writes the guarded update of a job, its follow-up jobs or the outbox rows that
owe them, and its dead-letter row, in one transaction, so an outcome never commits
without its follow-ups:

- ``_finalize`` (async only: only the worker finalizes): worker outcomes, in batches;
- ``_apply_async`` (its sync twin ``_apply`` is generated): callback resolutions, and the
  operator's cancel, retry and drain, which both clients make;
- ``_rescue`` (async only: only the maintenance leader rescues): attempts whose worker
  died, that outlived their deadline, or whose callback timed out;
- ``_queries`` (async only): the finalize and rescue statements.

What a transition does to a job is decided by pure code elsewhere (``wai._outcomes``,
``wai._retry``, ``wai._followups``); this package only writes it. Transitions that carry
no follow-ups stay with their owner: the claim (``wai.worker``), promotion of due jobs
(``wai.maintenance``) and the dead-letter queue's own retry and purge (``wai.dlq``).
"""
