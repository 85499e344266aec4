"""The chaos soak's probes and its invariant checker, in SQL.

:data:`SCHEMA` is installed (with ``tests.faults._contract.PROBES``: ``runs``, ``late``,
``finalizations``) before any worker starts. The schema ``chaos`` holds:

- ``produced``: every job id the producer committed, written in the producer's
  transaction, so it lists exactly the committed jobs, with the mix it drew them from;
- ``expected_specs``: the follow-up specs the app registers, per kind and outcome;
- ``cron_due``: every fire time of the periodic schedule that was due before the
  producer stopped;
- ``callbacks``: every callback id a handler registered, the action the resolver is to
  take, and what came of it;
- ``transitions``: an ``AFTER UPDATE`` trigger on ``wai.jobs`` logs every change that
  leaves ``running`` or ``waiting_external`` (it commits or rolls back with the change),
  with the run lease of the row after it (the one follow-up lineage names), and
  ``outcomes`` reads them as the outcomes follow-ups are registered for.

:func:`check` then counts the violations of each invariant (:data:`INVARIANTS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, LiteralString

SCHEMA: LiteralString = """
CREATE SCHEMA chaos;
CREATE TABLE chaos.produced (
    job_id bigint PRIMARY KEY,
    kind text NOT NULL,
    mode text NOT NULL,
    poison text NOT NULL,
    queue text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE chaos.expected_specs (
    kind text NOT NULL,
    outcome text NOT NULL,
    spec text NOT NULL,
    PRIMARY KEY (kind, outcome, spec)
);
CREATE TABLE chaos.cron_due (
    due_at timestamptz PRIMARY KEY
);
CREATE TABLE chaos.callbacks (
    callback_id uuid PRIMARY KEY,
    job_id bigint NOT NULL,
    run_lease bigint NOT NULL,
    action text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    resolved_at timestamptz,
    status int
);
CREATE TABLE chaos.transitions (
    job_id bigint NOT NULL,
    kind text NOT NULL,
    run_lease bigint NOT NULL,
    old_state text NOT NULL,
    new_state text NOT NULL,
    rescued text,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION chaos.log_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos.transitions (job_id, kind, run_lease, old_state, new_state, rescued)
    VALUES (OLD.id, OLD.kind, NEW.run_lease, OLD.state::text, NEW.state::text,
            CASE WHEN jsonb_array_length(NEW.errors) > jsonb_array_length(OLD.errors)
                 THEN NEW.errors -> -1 ->> 'rescued' END);
    RETURN NULL;
END
$$;
CREATE TRIGGER chaos_log_transition AFTER UPDATE ON wai.jobs FOR EACH ROW
    WHEN (OLD.state IN ('running', 'waiting_external') AND NEW.state IS DISTINCT FROM OLD.state)
    EXECUTE FUNCTION chaos.log_transition();
-- The outcome each logged transition is, in the names follow-up specs are registered
-- under (SPEC §4.1); NULL for those that are none (snooze, shutdown release, resume).
CREATE VIEW chaos.outcomes AS
SELECT job_id, kind, run_lease, new_state, at,
       CASE WHEN rescued IS NOT NULL THEN 'rescued'
            WHEN new_state = 'completed' THEN 'completed'
            WHEN new_state = 'cancelled' THEN 'cancelled'
            WHEN new_state = 'failed' THEN 'exhausted'
            WHEN old_state = 'running' AND new_state = 'retryable' THEN 'retried'
            WHEN old_state = 'waiting_external' AND new_state = 'available' THEN 'retried'
            WHEN old_state = 'running' AND new_state = 'waiting_external'
                THEN 'waiting_for_callback'
       END AS outcome
FROM chaos.transitions;
-- Every job row, including those in the dead-letter queue.
CREATE VIEW chaos.all_jobs AS
SELECT id, kind, queue, state::text AS state, run_at, metadata,
       trigger_job_id, trigger_run_lease, trigger_outcome, trigger_spec, false AS dlq
FROM wai.jobs
UNION ALL
SELECT j.id, j.kind, j.queue, 'dead-lettered', j.run_at, j.metadata,
       j.trigger_job_id, j.trigger_run_lease, j.trigger_outcome, j.trigger_spec, true
FROM wai.dlq AS d, LATERAL jsonb_populate_record(NULL::wai.jobs, d.job) AS j;
"""

RECORD_PRODUCED: LiteralString = """
INSERT INTO chaos.produced (job_id, kind, mode, poison, queue)
SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[])
"""

RECORD_SPECS: LiteralString = """
INSERT INTO chaos.expected_specs (kind, outcome, spec)
SELECT * FROM unnest(%s::text[], %s::text[], %s::text[])
"""

#: The fire times due from the schedule's creation (its first cursor) to %s.
RECORD_CRON_DUE: LiteralString = """
INSERT INTO chaos.cron_due (due_at)
SELECT generate_series(date_trunc('second', c.created_at) + interval '1 second',
                       %s::timestamptz, interval '1 second')
FROM wai.cron_schedules AS c WHERE c.name = %s
"""

_EXPECTED_FOLLOWUPS: LiteralString = """
    SELECT o.job_id, o.run_lease, o.outcome, s.spec
    FROM chaos.outcomes AS o JOIN chaos.expected_specs AS s USING (kind, outcome)
"""
_FOLLOWUPS: LiteralString = """
    SELECT id, trigger_job_id AS job_id, trigger_run_lease AS run_lease,
           trigger_outcome AS outcome, trigger_spec AS spec
    FROM chaos.all_jobs WHERE trigger_job_id IS NOT NULL
"""
_TICKS: LiteralString = """
    SELECT id, (metadata -> 'wai.cron' ->> 'fire_time')::timestamptz AS fire_at
    FROM chaos.all_jobs WHERE metadata ? 'wai.cron'
"""


@dataclass(frozen=True, slots=True)
class Invariant:
    """A named check: ``query`` returns one row per violation, a description first.

    An invariant that is not ``counted`` is shown (marked ``info``) but does not fail
    the soak: what it finds is wai's documented behaviour, not a loss.
    """

    name: str
    query: LiteralString
    counted: bool = True


INVARIANTS: tuple[Invariant, ...] = (
    Invariant(
        "no job lost (every produced id in jobs or the DLQ)",
        """SELECT 'job ' || p.job_id FROM chaos.produced AS p
           WHERE NOT EXISTS (SELECT 1 FROM chaos.all_jobs AS j WHERE j.id = p.job_id)""",
    ),
    Invariant(
        "no attempt finalized twice (job, lease)",
        """SELECT format('job %s lease %s: %s', job_id, run_lease, string_agg(state, ', '))
           FROM finalizations GROUP BY job_id, run_lease HAVING count(*) > 1""",
    ),
    Invariant(
        "no job terminal twice",
        """SELECT format('job %s: %s', job_id, string_agg(new_state || '@' || run_lease, ', '))
           FROM chaos.transitions WHERE new_state IN ('completed', 'failed', 'cancelled')
           GROUP BY job_id HAVING count(*) > 1""",
    ),
    Invariant(
        "every committed outcome has its follow-ups",
        "WITH e AS ("
        + _EXPECTED_FOLLOWUPS
        + "), f AS ("
        + _FOLLOWUPS
        + """) SELECT format('job %s lease %s %s: no %s', e.job_id, e.run_lease, e.outcome,
                             e.spec)
           FROM e WHERE NOT EXISTS (
               SELECT 1 FROM f WHERE (f.job_id, f.run_lease, f.outcome, f.spec)
                                     = (e.job_id, e.run_lease, e.outcome, e.spec))
           AND NOT EXISTS (
               SELECT 1 FROM wai.outbox AS x
               WHERE (x.job_id, x.run_lease, x.outcome) = (e.job_id, e.run_lease, e.outcome)
                 AND x.last_error IS NOT NULL)""",
    ),
    Invariant(
        "no follow-up enqueued twice",
        "WITH f AS ("
        + _FOLLOWUPS
        + """) SELECT format('job %s lease %s %s %s: %s follow-ups', job_id, run_lease,
                             outcome, spec, count(*))
           FROM f GROUP BY job_id, run_lease, outcome, spec HAVING count(*) > 1""",
    ),
    Invariant(
        "no follow-up without its committed outcome",
        "WITH e AS ("
        + _EXPECTED_FOLLOWUPS
        + "), f AS ("
        + _FOLLOWUPS
        + """) SELECT format('follow-up %s of job %s lease %s %s (%s)', f.id, f.job_id,
                             f.run_lease, f.outcome, f.spec)
           FROM f WHERE NOT EXISTS (
               SELECT 1 FROM e WHERE (f.job_id, f.run_lease, f.outcome, f.spec)
                                     = (e.job_id, e.run_lease, e.outcome, e.spec))""",
    ),
    Invariant(
        "outbox: nothing left but poison closures' failed rows",
        """SELECT format('outbox %s: job %s lease %s %s (%s attempts): %s', o.id, o.job_id,
                         o.run_lease, o.outcome, o.attempts, left(o.last_error, 120))
           FROM wai.outbox AS o LEFT JOIN chaos.produced AS p ON p.job_id = o.job_id
           WHERE EXISTS (SELECT 1 FROM chaos.expected_specs AS s
                         WHERE (s.kind, s.outcome) = (o.kind, o.outcome))
             AND NOT (o.last_error IS NOT NULL AND p.poison IS NOT DISTINCT FROM 'closure')""",
    ),
    # Rescue leaves an outbox row for every rescued job, whatever its kind: a row whose
    # kind and outcome no process has a spec for owes no follow-up, and retention deletes
    # it (an "orphan", docs/runtime.md). Shown, not counted.
    Invariant(
        "outbox: orphan rows (no spec for the outcome)",
        """SELECT format('outbox %s: job %s (%s) lease %s %s: no spec, never dispatched', o.id,
                         o.job_id, o.kind, o.run_lease, o.outcome)
           FROM wai.outbox AS o
           WHERE NOT EXISTS (SELECT 1 FROM chaos.expected_specs AS s
                             WHERE (s.kind, s.outcome) = (o.kind, o.outcome))""",
        counted=False,
    ),
    Invariant(
        "no job left non-terminal after the drain",
        """SELECT format('job %s (%s, %s %s): %s', j.id, j.kind, p.mode, p.poison, j.state)
           FROM wai.jobs AS j LEFT JOIN chaos.produced AS p ON p.job_id = j.id
           WHERE j.state NOT IN ('completed', 'failed', 'cancelled')
             AND NOT (p.poison IS NOT DISTINCT FROM 'huge_retry'
                      AND j.state IN ('retryable', 'scheduled')
                      AND j.run_at > now() + interval '1 hour')""",
    ),
    Invariant(
        "cron fired exactly once per due time",
        "WITH t AS ("
        + _TICKS
        + """) SELECT format('%s: fired %s times', d.due_at,
                             (SELECT count(*) FROM t WHERE t.fire_at = d.due_at))
           FROM chaos.cron_due AS d
           WHERE (SELECT count(*) FROM t WHERE t.fire_at = d.due_at) <> 1
           UNION ALL
           SELECT format('%s: fired %s times', fire_at, count(*)) FROM t
           WHERE fire_at NOT IN (SELECT due_at FROM chaos.cron_due)
           GROUP BY fire_at HAVING count(*) > 1""",
    ),
    Invariant(
        "no attempt ran twice (runs per job, lease)",
        """SELECT format('job %s lease %s ran %s times (pids %s)', job_id, run_lease, count(*),
                         string_agg(pid::text, ', '))
           FROM runs GROUP BY job_id, run_lease HAVING count(*) > 1""",
    ),
)


@dataclass(frozen=True, slots=True)
class Violations:
    """How many rows an invariant's query returned, and the first few of them."""

    invariant: str
    count: int
    samples: list[str]
    counted: bool = True

    @property
    def failed(self) -> bool:
        return self.counted and self.count > 0


async def check(db: Any, samples: int = 5) -> list[Violations]:
    """Run every invariant against ``db`` (a ``tests.faults._contract.Db``)."""
    found: list[Violations] = []
    for inv in INVARIANTS:
        rows = await db.rows(inv.query)
        found.append(
            Violations(inv.name, len(rows), [str(r[0]) for r in rows[:samples]], inv.counted)
        )
    return found


def print_invariants(results: Sequence[Violations]) -> None:
    """The invariant table, then the first violations of each broken invariant."""
    width = max(len(r.invariant) for r in results)
    print(f"\n{'invariant':<{width}}  violations")
    print(f"{'-' * width}  ----------")
    for r in results:
        print(f"{r.invariant:<{width}}  {r.count:>10}" + ("" if r.counted else " (info)"))
    for r in results:
        if r.count:
            what = "violations" if r.counted else "rows (info, not a violation)"
            print(f"\n{r.invariant}: {r.count} {what}, e.g.")
            for line in r.samples:
                print(f"  {line}")


SUMMARY_PRODUCED: LiteralString = """
SELECT p.kind, p.mode, p.poison, count(*) AS produced,
       count(*) FILTER (WHERE j.state IN ('completed', 'failed', 'cancelled', 'dead-lettered'))
           AS finished,
       coalesce(sum(r.n), 0) AS rescues
FROM chaos.produced AS p
LEFT JOIN chaos.all_jobs AS j ON j.id = p.job_id
LEFT JOIN (SELECT job_id, count(*) AS n FROM chaos.outcomes WHERE outcome = 'rescued'
           GROUP BY job_id) AS r ON r.job_id = p.job_id
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
"""
SUMMARY_STATES: LiteralString = """
SELECT kind, state, count(*) FROM chaos.all_jobs GROUP BY 1, 2 ORDER BY 1, 2
"""
SUMMARY_OUTCOMES: LiteralString = """
SELECT outcome, count(*) FROM chaos.outcomes WHERE outcome IS NOT NULL GROUP BY 1 ORDER BY 1
"""
SUMMARY_CALLBACKS: LiteralString = """
SELECT action, coalesce(status::text, 'unsent'), count(*) FROM chaos.callbacks
GROUP BY 1, 2 ORDER BY 1, 2
"""
#: Terminal transitions per phase window (%s start, %s end).
FINISHED_BETWEEN: LiteralString = """
SELECT count(*) FROM chaos.transitions
WHERE new_state IN ('completed', 'failed', 'cancelled') AND at >= %s AND at < %s
"""


@dataclass(frozen=True, slots=True)
class Phase:
    """A stretch of the load phase: its name, wall-clock bounds, and faults in it."""

    name: str
    start: datetime
    end: datetime
    faults: int


async def print_summary(db: Any, phases: Sequence[Phase], faults: dict[str, int]) -> None:
    """Jobs produced and finished, outcomes, callbacks, faults, and throughput per phase."""
    print("\njobs produced (kind, mode, poison): produced, finished, rescues")
    for kind, mode, poison, produced, finished, rescues in await db.rows(SUMMARY_PRODUCED):
        print(
            f"  {kind:<6} {mode:<17} {poison or '-':<11} {produced:>8} {finished:>8} {rescues:>7}"
        )
    print("\nevery job row by kind and state (follow-ups and cron ticks included)")
    for kind, state, n in await db.rows(SUMMARY_STATES):
        print(f"  {kind:<10} {state:<16} {n:>8}")
    print(
        "\noutcomes committed: " + ", ".join(f"{o} {n}" for o, n in await db.rows(SUMMARY_OUTCOMES))
    )
    callbacks = await db.rows(SUMMARY_CALLBACKS)
    print("callbacks (action, HTTP status): " + ", ".join(f"{a} {s} {n}" for a, s, n in callbacks))
    print(
        "faults injected: " + (", ".join(f"{k} {n}" for k, n in sorted(faults.items())) or "none")
    )
    rates: list[float] = []
    for phase in phases:
        seconds = max((phase.end - phase.start).total_seconds(), 1e-9)
        done = int(await db.value(FINISHED_BETWEEN, (phase.start, phase.end)))
        rates.append(done / seconds)
        print(
            f"throughput, {phase.name}: {done / seconds:.1f} jobs finished/s"
            f" ({done} in {seconds:.0f} s, {phase.faults} faults)"
        )
    if len(rates) == 2 and rates[0] > 0:
        cost = 100 * (1 - rates[1] / rates[0])
        print(f"poison's cost: {cost:.1f} % of the throughput (target: at most 10 %)")
