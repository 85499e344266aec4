-- Operator actions: cancel and retry one job, pause, resume and drain a queue, queue stats.
--
-- The one-job actions lock the row first (`target`), so `prev_state` is the state the
-- action really found; the update only applies from the states it allows. A missing
-- `target` row means no such job; a `target` row without an updated row means the
-- job's state did not allow the action (nothing changed).
--
-- A cancel (one job or a drain) commits with the outbox rows of its Cancelled follow-ups,
-- written by wai.transitions in the same transaction: the `on_cancelled_enqueue` specs run
-- later in a process that holds them, so an operator's action runs no user code.
--
-- Cancel, drain and retry advance `run_lease`, as a claim does: follow-up lineage and the
-- outbox are keyed by (job, run lease, outcome), so cancel → retry → cancel of one job
-- must be two leases for its two cancels to get a follow-up each. The attempt that may
-- still run under the old lease is fenced as before (it no longer matches), and the
-- NOTIFY that tells its worker to stop carries that old lease (`target.run_lease`).

-- name: job_cancel :one
-- Cancel one non-terminal job; an attempt that may live in a worker is told to stop.
-- Advances the run lease.
WITH target AS (
    SELECT id, state AS prev_state, run_lease AS prev_lease
    FROM {schema}.jobs WHERE id = %(id)s::bigint FOR UPDATE
),
cancelled AS (
    UPDATE {schema}.jobs AS j
    SET state = 'cancelled',
        run_lease = j.run_lease + 1,
        finalized_at = now(),
        heartbeat_at = NULL,
        deadline_at = NULL,
        callback_id = NULL,
        callback_timeout_at = NULL,
        errors = j.errors || jsonb_build_array(jsonb_build_object(
            'error', 'cancelled by operator', 'attempt', j.attempt, 'at', now()))
    FROM target AS t
    WHERE j.id = t.id AND t.prev_state NOT IN ('completed', 'failed', 'cancelled')
    RETURNING j.*
),
notified AS (
    SELECT pg_notify(%(cancel_channel)s,
                     json_build_object('job_id', c.id, 'run_lease', t.prev_lease)::text)
    FROM cancelled AS c, target AS t
    WHERE t.prev_state IN ('running', 'waiting_external')
)
SELECT t.prev_state::text AS prev_state, c.*
FROM target AS t LEFT JOIN cancelled AS c ON true
-- Always true: counting a SELECT CTE runs it whole; one never read would send no NOTIFY.
WHERE (SELECT count(*) FROM notified) >= 0;

-- name: job_retry :one
-- Make a failed, cancelled or waiting_external job available now; its error history
-- stays. The attempt count is kept (each claim adds one), so max_attempts still bounds
-- how often the job runs: a job with no attempt left gets exactly one more
-- (max_attempts = attempt + 1), as in River and Oban. Advances the run lease. Wakes the
-- queue, and tells a parked attempt (old lease) to stop.
WITH target AS (
    SELECT id, state AS prev_state, run_lease AS prev_lease
    FROM {schema}.jobs WHERE id = %(id)s::bigint FOR UPDATE
),
retried AS (
    UPDATE {schema}.jobs AS j
    SET state = 'available',
        run_lease = j.run_lease + 1,
        max_attempts = greatest(j.max_attempts, j.attempt + 1),
        run_at = now(),
        finalized_at = NULL,
        heartbeat_at = NULL,
        deadline_at = NULL,
        callback_id = NULL,
        callback_timeout_at = NULL
    FROM target AS t
    WHERE j.id = t.id AND t.prev_state IN ('failed', 'cancelled', 'waiting_external')
    RETURNING j.*, t.prev_state AS retried_from, t.prev_lease
),
woken AS (
    SELECT pg_notify(%(channel)s, r.queue) FROM retried AS r
),
stopped AS (
    SELECT pg_notify(%(cancel_channel)s,
                     json_build_object('job_id', r.id, 'run_lease', r.prev_lease)::text)
    FROM retried AS r WHERE r.retried_from = 'waiting_external'
)
SELECT t.prev_state::text AS prev_state, r.*
FROM target AS t LEFT JOIN retried AS r ON true
-- Always true: counting a SELECT CTE runs it whole; one never read would send no NOTIFY.
WHERE (SELECT count(*) FROM woken) >= 0 AND (SELECT count(*) FROM stopped) >= 0;

-- name: queue_pause :one
-- Stop claims from a queue (inserts still land); idempotent, keeps the first paused_at.
INSERT INTO {schema}.queues AS q (name, paused, paused_at, updated_at)
VALUES (%(name)s, true, now(), now())
ON CONFLICT (name) DO UPDATE
SET paused = true,
    paused_at = CASE WHEN q.paused THEN q.paused_at ELSE now() END,
    updated_at = now()
RETURNING q.name, q.paused, q.paused_at;

-- name: queue_set_limits :one
-- Replace a queue's flow control (NULLs lift a limit), creating its row if needed. A rate
-- limit that changes starts with a full bucket; one set again unchanged keeps its tokens.
-- Workers re-read the limits at once (a note on the flow channel) and wake, and a claim
-- under way finishes under the old ones.
WITH stored AS (
    INSERT INTO {schema}.queues AS q (
        name, rate_limit, rate_per, rate_burst, global_concurrency, updated_at)
    VALUES (%(name)s, %(rate_limit)s, %(rate_per)s, %(rate_burst)s, %(global_concurrency)s,
            now())
    ON CONFLICT (name) DO UPDATE
    SET rate_limit = excluded.rate_limit,
        rate_per = excluded.rate_per,
        rate_burst = excluded.rate_burst,
        rate_tokens = CASE WHEN (excluded.rate_limit, excluded.rate_per, excluded.rate_burst)
                                IS NOT DISTINCT FROM (q.rate_limit, q.rate_per, q.rate_burst)
                           THEN q.rate_tokens END,
        rate_at = CASE WHEN (excluded.rate_limit, excluded.rate_per, excluded.rate_burst)
                            IS NOT DISTINCT FROM (q.rate_limit, q.rate_per, q.rate_burst)
                       THEN q.rate_at END,
        global_concurrency = excluded.global_concurrency,
        updated_at = now()
    RETURNING q.name
)
SELECT s.name, pg_notify(%(flow_channel)s, s.name), pg_notify(%(channel)s, s.name)
FROM stored AS s;

-- name: kind_limit_set :one
-- Set (or, with a NULL limit, lift) the rate limit of one kind within a queue. The queue's
-- row is created if missing and locked first, so that no claim of the queue is spending
-- the bucket while it changes. Workers re-read the queue's limits at once.
WITH locked AS (
    INSERT INTO {schema}.queues AS q (name) VALUES (%(queue)s)
    ON CONFLICT (name) DO UPDATE SET updated_at = now()
    RETURNING q.name
),
lifted AS (
    DELETE FROM {schema}.kind_limits AS k
    WHERE %(rate_limit)s::int IS NULL AND k.queue = (SELECT name FROM locked)
      AND k.kind = %(kind)s
    RETURNING k.queue
),
stored AS (
    INSERT INTO {schema}.kind_limits AS k (queue, kind, rate_limit, rate_per, rate_burst)
    SELECT l.name, %(kind)s, %(rate_limit)s, %(rate_per)s, %(rate_burst)s
    FROM locked AS l
    WHERE %(rate_limit)s::int IS NOT NULL
    ON CONFLICT (queue, kind) DO UPDATE
    SET rate_limit = excluded.rate_limit,
        rate_per = excluded.rate_per,
        rate_burst = excluded.rate_burst,
        rate_tokens = CASE WHEN (excluded.rate_limit, excluded.rate_per, excluded.rate_burst)
                                IS NOT DISTINCT FROM (k.rate_limit, k.rate_per, k.rate_burst)
                           THEN k.rate_tokens END,
        rate_at = CASE WHEN (excluded.rate_limit, excluded.rate_per, excluded.rate_burst)
                            IS NOT DISTINCT FROM (k.rate_limit, k.rate_per, k.rate_burst)
                       THEN k.rate_at END,
        updated_at = now()
    RETURNING k.queue
)
SELECT l.name, pg_notify(%(flow_channel)s, l.name), pg_notify(%(channel)s, l.name)
FROM locked AS l
WHERE (SELECT count(*) FROM lifted) >= 0 AND (SELECT count(*) FROM stored) >= 0;

-- name: queue_kind_limits_flag :exec
-- Whether the queue has kind limits, counted again after kind_limit_set in its transaction
-- (a statement of its own: its snapshot sees every kind limit committed before the queue's
-- row was locked, and this transaction's change).
UPDATE {schema}.queues AS q
SET has_kind_limits = EXISTS (SELECT 1 FROM {schema}.kind_limits AS k WHERE k.queue = q.name)
WHERE q.name = %(queue)s;

-- name: queue_resume :one
-- Let workers claim from a queue again and wake them at once.
WITH resumed AS (
    INSERT INTO {schema}.queues AS q (name, paused, paused_at, updated_at)
    VALUES (%(name)s, false, NULL, now())
    ON CONFLICT (name) DO UPDATE SET paused = false, paused_at = NULL, updated_at = now()
    RETURNING q.name, q.paused, q.paused_at
),
woken AS (
    SELECT pg_notify(%(channel)s, resumed.name) FROM resumed
)
-- Always true: counting a SELECT CTE runs it whole; one never read would send no NOTIFY.
SELECT resumed.* FROM resumed WHERE (SELECT count(*) FROM woken) >= 0;

-- name: queue_drain :one
-- Cancel every job of a queue that is waiting to run (available, scheduled, retryable,
-- waiting_external); running attempts are left alone. Returns the cancelled ids; each
-- one's run lease advances. Rows are locked in id order, as every bulk update here does,
-- so two drains (or a drain and a rescue) wait for each other instead of deadlocking.
WITH target AS (
    SELECT id, state AS prev_state, run_lease AS prev_lease FROM {schema}.jobs
    WHERE queue = %(queue)s
      AND state IN ('available', 'scheduled', 'retryable', 'waiting_external')
    ORDER BY id
    FOR UPDATE
),
drained AS (
    UPDATE {schema}.jobs AS j
    SET state = 'cancelled',
        run_lease = j.run_lease + 1,
        finalized_at = now(),
        heartbeat_at = NULL,
        deadline_at = NULL,
        callback_id = NULL,
        callback_timeout_at = NULL,
        errors = j.errors || jsonb_build_array(jsonb_build_object(
            'error', 'cancelled by operator: queue drained', 'attempt', j.attempt, 'at', now()))
    FROM target AS t
    WHERE j.id = t.id
      AND j.state IN ('available', 'scheduled', 'retryable', 'waiting_external')
    RETURNING j.*, t.prev_state, t.prev_lease
),
stopped AS (
    SELECT pg_notify(%(cancel_channel)s,
                     json_build_object('job_id', d.id, 'run_lease', d.prev_lease)::text)
    FROM drained AS d WHERE d.prev_state = 'waiting_external'
)
-- Always true: counting a SELECT CTE runs it whole; one never read would send no NOTIFY.
SELECT id FROM drained WHERE (SELECT count(*) FROM stopped) >= 0;

-- name: queue_live_counts :many
-- Per queue: exact counts of the jobs that are not finished, by state, with how long the
-- oldest available job has been due, the queue's pause flag and its flow control: the
-- limits, the bucket's tokens now, the ordering keys with an attempt running, and the
-- available jobs held back by an earlier job of their key. One branch per partial index
-- (the claim, running, due and waiting indexes), so only live rows are read however
-- much finished history the table holds. Queues are those with live jobs plus those in
-- the queues table.
WITH live AS (
    SELECT queue, 'available' AS state, count(*) AS n, min(run_at) AS oldest_available
    FROM {schema}.jobs WHERE state = 'available' GROUP BY queue
    UNION ALL
    SELECT queue, 'running', count(*), NULL FROM {schema}.jobs
    WHERE state = 'running' GROUP BY queue
    UNION ALL
    SELECT queue, state::text, count(*), NULL FROM {schema}.jobs
    WHERE state IN ('scheduled', 'retryable') GROUP BY queue, state
    UNION ALL
    SELECT queue, 'waiting_external', count(*), NULL FROM {schema}.jobs
    WHERE state = 'waiting_external' GROUP BY queue
),
per_queue AS (
    SELECT queue AS name,
           jsonb_object_agg(state, n) AS counts,
           min(oldest_available) AS oldest_available
    FROM live
    GROUP BY queue
),
turns AS (
    SELECT queue AS name, count(*) AS keys_running FROM {schema}.key_turns GROUP BY queue
),
held AS (
    SELECT j.queue AS name, count(*) AS waiting_turn
    FROM {schema}.jobs AS j
    -- The state listed again as jobs_ordering_idx lists it, so that the index answers.
    WHERE j.state = 'available' AND j.ordering_key IS NOT NULL
      AND j.state IN ('scheduled', 'available', 'running', 'retryable', 'waiting_external')
      AND EXISTS (
          SELECT 1 FROM {schema}.jobs AS o
          WHERE o.queue = j.queue AND o.ordering_key = j.ordering_key AND o.id < j.id
            AND o.state IN ('scheduled', 'available', 'running', 'retryable', 'waiting_external'))
    GROUP BY j.queue
),
kinds AS (
    SELECT k.queue AS name,
           jsonb_object_agg(k.kind, jsonb_build_object(
               'limit', k.rate_limit, 'per', k.rate_per, 'burst', k.rate_burst,
               'tokens', least(k.rate_burst::float8,
                               coalesce(k.rate_tokens, k.rate_burst::float8)
                               + k.rate_limit / k.rate_per
                                 * greatest(0, extract(epoch FROM now()
                                                             - coalesce(k.rate_at, now())))))
           ) AS kind_limits
    FROM {schema}.kind_limits AS k
    GROUP BY k.queue
),
names AS (
    SELECT name FROM per_queue UNION SELECT name FROM {schema}.queues
)
SELECT n.name,
       coalesce(p.counts, '{}'::jsonb) AS counts,
       coalesce(q.paused, false) AS paused,
       q.paused_at,
       coalesce(greatest(extract(epoch FROM now() - p.oldest_available), 0), 0)::float8
           AS oldest_available_lag,
       q.rate_limit, q.rate_per, q.rate_burst,
       CASE WHEN q.rate_limit IS NOT NULL THEN
           least(q.rate_burst::float8, coalesce(q.rate_tokens, q.rate_burst::float8)
                 + q.rate_limit / q.rate_per
                   * greatest(0, extract(epoch FROM now() - coalesce(q.rate_at, now()))))
       END AS rate_tokens,
       q.global_concurrency,
       coalesce(q.retry_holds_key, true) AS retry_holds_key,
       coalesce(t.keys_running, 0)::int AS keys_running,
       coalesce(h.waiting_turn, 0)::int AS waiting_turn,
       coalesce(kl.kind_limits, '{}'::jsonb) AS kind_limits
FROM names AS n
LEFT JOIN per_queue AS p ON p.name = n.name
LEFT JOIN {schema}.queues AS q ON q.name = n.name
LEFT JOIN turns AS t ON t.name = n.name
LEFT JOIN held AS h ON h.name = n.name
LEFT JOIN kinds AS kl ON kl.name = n.name;

-- name: queue_flow_figures :many
-- The flow control gauges of every queue that has a limit (its own, or a rate limit of one
-- of its kinds) or ordering keys at work: the bucket's tokens now (with a rate limit), the
-- global concurrency, the ordering keys with an attempt running, the available jobs held
-- back by an earlier job of their key (as queue_live_counts counts them), and the tokens
-- now of each of its rate-limited kinds' buckets (kind_tokens: {kind: tokens}, empty
-- without one). Reads the queues table, kind_limits, key_turns (a row per running key) and
-- the available jobs that carry an ordering key, through their partial indexes: never the
-- jobs without a key, nor finished ones.
WITH turns AS (
    SELECT queue AS name, count(*) AS keys_running FROM {schema}.key_turns GROUP BY queue
),
held AS (
    SELECT j.queue AS name, count(*) AS waiting_turn
    FROM {schema}.jobs AS j
    -- The state listed again as jobs_ordering_idx lists it, so that the index answers.
    WHERE j.state = 'available' AND j.ordering_key IS NOT NULL
      AND j.state IN ('scheduled', 'available', 'running', 'retryable', 'waiting_external')
      AND EXISTS (
          SELECT 1 FROM {schema}.jobs AS o
          WHERE o.queue = j.queue AND o.ordering_key = j.ordering_key AND o.id < j.id
            AND o.state IN ('scheduled', 'available', 'running', 'retryable', 'waiting_external'))
    GROUP BY j.queue
),
kinds AS (
    SELECT k.queue AS name,
           jsonb_object_agg(k.kind, greatest(0, least(k.rate_burst::float8,
               coalesce(k.rate_tokens, k.rate_burst::float8)
               + k.rate_limit / k.rate_per
                 * greatest(0, extract(epoch FROM now() - coalesce(k.rate_at, now()))))))
               AS kind_tokens
    FROM {schema}.kind_limits AS k
    GROUP BY k.queue
),
names AS (
    SELECT name FROM {schema}.queues
    WHERE rate_limit IS NOT NULL OR global_concurrency IS NOT NULL
    UNION SELECT name FROM turns
    UNION SELECT name FROM held
    UNION SELECT name FROM kinds
)
SELECT n.name,
       CASE WHEN q.rate_limit IS NOT NULL THEN
           greatest(0, least(q.rate_burst::float8, coalesce(q.rate_tokens, q.rate_burst::float8)
                 + q.rate_limit / q.rate_per
                   * greatest(0, extract(epoch FROM now() - coalesce(q.rate_at, now())))))
       END AS rate_tokens,
       q.global_concurrency,
       coalesce(t.keys_running, 0)::int AS keys_running,
       coalesce(h.waiting_turn, 0)::int AS waiting_turn,
       coalesce(kl.kind_tokens, '{}'::jsonb) AS kind_tokens
FROM names AS n
LEFT JOIN {schema}.queues AS q ON q.name = n.name
LEFT JOIN turns AS t ON t.name = n.name
LEFT JOIN held AS h ON h.name = n.name
LEFT JOIN kinds AS kl ON kl.name = n.name
ORDER BY n.name;

-- name: jobs_size_estimate :one
-- How many rows the jobs table holds by the planner's reckoning: its density at the last
-- VACUUM or ANALYZE times its size now (NULL before the first). Reads no row of the table.
SELECT CASE WHEN c.reltuples < 0 OR c.relpages = 0 THEN NULL
            ELSE c.reltuples / c.relpages
                 * (pg_relation_size(c.oid) / current_setting('block_size')::int)
       END::float8 AS rows
FROM pg_class AS c
JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relname = 'jobs';

-- name: queue_finished_counts :many
-- Exact counts of finished jobs per queue and state: a scan of the table, used only while
-- it is small (wai._admin.EXACT_COUNT_LIMIT).
SELECT queue AS name, state::text AS state, count(*)::float8 AS n
FROM {schema}.jobs
WHERE state IN ('completed', 'failed', 'cancelled')
GROUP BY queue, state;

-- name: queue_finished_estimates :many
-- Estimated counts of jobs per queue and state, from the (queue, state) statistics of the
-- last ANALYZE: each pair's share of the table times its estimated size now. Pairs too rare
-- for the statistics' sample are missing (counted 0). No row: no statistics yet, or the
-- role may not see them (pg_stats_ext shows only the statistics of tables it owns).
SELECT m.vals[i][1] AS name, m.vals[i][2] AS state, m.freqs[i] * %(rows)s::float8 AS n
FROM (
    SELECT s.most_common_vals AS vals, s.most_common_freqs AS freqs
    FROM pg_stats_ext AS s
    WHERE s.statistics_schemaname = %(schema)s AND s.statistics_name = 'jobs_queue_state'
      AND s.most_common_vals IS NOT NULL
) AS m,
LATERAL generate_subscripts(m.freqs, 1) AS i;

-- name: queue_depth_history :many
-- The depth samples of the last %(minutes)s minutes, oldest first (optionally one queue's).
SELECT at, queue, counts, oldest_available_lag
FROM {schema}.queue_depth
WHERE at >= now() - make_interval(mins => %(minutes)s::int)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
ORDER BY at, queue;

-- name: throughput_history :many
-- Counts by event for every minute of the last %(minutes)s (the current one included),
-- oldest first, summed over queues and kinds unless filtered; a minute with nothing
-- counted has an empty object.
WITH window_ AS (
    SELECT date_trunc('minute', now()) AS last,
           date_trunc('minute', now()) - make_interval(mins => %(minutes)s::int - 1) AS first
),
counted AS (
    SELECT t.minute, t.event, sum(t.n)::bigint AS n
    FROM {schema}.throughput AS t, window_ AS w
    WHERE t.minute BETWEEN w.first AND w.last
      AND (%(queue)s::text IS NULL OR t.queue = %(queue)s::text)
      AND (%(kind)s::text IS NULL OR t.kind = %(kind)s::text)
    GROUP BY t.minute, t.event
)
SELECT m.minute,
       coalesce(jsonb_object_agg(c.event, c.n) FILTER (WHERE c.event IS NOT NULL), '{}')
           AS counts
FROM window_ AS w,
     LATERAL generate_series(w.first, w.last, interval '1 minute') AS m(minute)
LEFT JOIN counted AS c ON c.minute = m.minute
GROUP BY m.minute
ORDER BY m.minute;
