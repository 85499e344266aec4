-- name: job_insert :many
-- Insert one job that is not unique (a unique one goes through job_insert_unique).
-- RETURNING lists wai.job.INSERT_COLUMNS, what the server chose for the row (the client
-- knows the rest: it sent them), then the NOTIFY that wakes the workers of an available
-- job's queue, sent at commit. A plain INSERT: the same statement as
-- WITH ins AS (INSERT ...) SELECT ... costs about 60 us less server time per job.
-- Empty tags come as NULL.
INSERT INTO {schema}.jobs (
    kind, queue, args, state, priority, max_attempts, run_at, tags, metadata,
    unique_key, unique_states, ordering_key,
    trigger_job_id, trigger_run_lease, trigger_outcome, trigger_spec
)
VALUES (
    %(kind)s, %(queue)s, %(args)s::jsonb, %(state)s::{schema}.job_state, %(priority)s,
    %(max_attempts)s, coalesce(%(run_at)s::timestamptz, now()),
    coalesce(%(tags)s::text[], '{}'), %(metadata)s::jsonb, %(unique_key)s::bytea,
    %(unique_states)s::{schema}.job_state[], %(ordering_key)s::text,
    %(trigger_job_id)s::bigint, %(trigger_run_lease)s::bigint, %(trigger_outcome)s::text,
    %(trigger_spec)s::text
)
RETURNING
    id, run_at, created_at, unique_key,
    CASE WHEN state = 'available' THEN pg_notify(%(channel)s, queue) END;

-- name: job_insert_unique :many
-- job_insert for a unique job: the same statement plus ON CONFLICT, so that a job whose
-- key is held inserts nothing. Keep the two in step.
INSERT INTO {schema}.jobs (
    kind, queue, args, state, priority, max_attempts, run_at, tags, metadata,
    unique_key, unique_states, ordering_key,
    trigger_job_id, trigger_run_lease, trigger_outcome, trigger_spec
)
VALUES (
    %(kind)s, %(queue)s, %(args)s::jsonb, %(state)s::{schema}.job_state, %(priority)s,
    %(max_attempts)s, coalesce(%(run_at)s::timestamptz, now()),
    coalesce(%(tags)s::text[], '{}'), %(metadata)s::jsonb, %(unique_key)s::bytea,
    %(unique_states)s::{schema}.job_state[], %(ordering_key)s::text,
    %(trigger_job_id)s::bigint, %(trigger_run_lease)s::bigint, %(trigger_outcome)s::text,
    %(trigger_spec)s::text
)
ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states)
DO NOTHING
RETURNING
    id, run_at, created_at, unique_key,
    CASE WHEN state = 'available' THEN pg_notify(%(channel)s, queue) END;

-- name: job_insert_many :many
-- Insert many jobs in one statement; ids follow the input order. For batches without a
-- unique job, which cannot conflict on jobs_unique_idx: without ON CONFLICT, no row pays
-- for a speculative insertion (a lock and a WAL record each).
-- Every parameter is a JSON array with one element per job, which the client builds in one
-- call and the server parses once: text columns as strings or null, args and metadata as
-- objects, tags and unique_states as arrays (unique_states null for a job that is not
-- unique), unique_key as hex, trigger as [job_id, run_lease, outcome, spec] or null. A
-- parameter is NULL when no job of the batch sets its column (no run_at, tags,
-- metadata...): ROWS FROM pads the empty set of jsonb_array_elements(NULL) with NULLs.
-- RETURNING lists wai.job.INSERT_COLUMNS, then the NOTIFY of an available job's queue:
-- PostgreSQL sends one per queue, at commit. That costs less than a WITH ins AS
-- (INSERT ...) that selects the distinct queues; the client sorts the rows by id.
INSERT INTO {schema}.jobs (
    kind, queue, args, state, priority, max_attempts, run_at, tags, metadata,
    unique_key, unique_states, ordering_key,
    trigger_job_id, trigger_run_lease, trigger_outcome, trigger_spec
)
SELECT
    r.kind, r.queue, r.args, r.state::{schema}.job_state, r.priority::smallint,
    r.max_attempts::int, coalesce(r.run_at::timestamptz, now()),
    CASE WHEN jsonb_array_length(r.tags) > 0
        THEN ARRAY(SELECT jsonb_array_elements_text(r.tags)) ELSE '{}' END,
    coalesce(r.metadata, '{}'), decode(r.unique_key, 'hex'),
    CASE jsonb_typeof(r.unique_states) WHEN 'array' THEN
        ARRAY(SELECT s::{schema}.job_state FROM jsonb_array_elements_text(r.unique_states) AS s)
    END,
    r.ordering_key, (r.trigger ->> 0)::bigint, (r.trigger ->> 1)::bigint, r.trigger ->> 2,
    r.trigger ->> 3
FROM ROWS FROM (
    jsonb_array_elements_text(%(kind)s::jsonb),
    jsonb_array_elements_text(%(queue)s::jsonb),
    jsonb_array_elements(%(args)s::jsonb),
    jsonb_array_elements_text(%(state)s::jsonb),
    jsonb_array_elements_text(%(priority)s::jsonb),
    jsonb_array_elements_text(%(max_attempts)s::jsonb),
    jsonb_array_elements_text(%(run_at)s::jsonb),
    jsonb_array_elements(%(tags)s::jsonb),
    jsonb_array_elements(%(metadata)s::jsonb),
    jsonb_array_elements_text(%(unique_key)s::jsonb),
    jsonb_array_elements(%(unique_states)s::jsonb),
    jsonb_array_elements_text(%(ordering_key)s::jsonb),
    jsonb_array_elements(%(trigger)s::jsonb)
) WITH ORDINALITY AS r(
    kind, queue, args, state, priority, max_attempts, run_at, tags, metadata,
    unique_key, unique_states, ordering_key, trigger, ord
)
ORDER BY r.ord
RETURNING
    id, run_at, created_at, unique_key,
    CASE WHEN state = 'available' THEN pg_notify(%(channel)s, queue) END;

-- name: job_copy :exec
-- Bulk-load jobs with COPY (client.copy_many), one row per job in this column order, in
-- COPY's text format; run_at takes its default, now(). There is no RETURNING and no ON
-- CONFLICT: a job with a unique key never comes here, and the caller wakes the queues
-- (job_notify_queues) in the same transaction.
COPY {schema}.jobs (
    kind, queue, args, state, priority, max_attempts, tags, metadata, ordering_key
) FROM STDIN;

-- name: job_copy_scheduled :exec
-- job_copy for jobs that carry their own run_at (scheduled ones): the same columns, then it.
COPY {schema}.jobs (
    kind, queue, args, state, priority, max_attempts, tags, metadata, ordering_key, run_at
) FROM STDIN;

-- name: job_notify_queues :exec
-- Wake the workers of these queues (each once), at commit: what the insert statements'
-- RETURNING does for the rows they insert.
SELECT pg_notify(%(channel)s, q) FROM unnest(%(queues)s::text[]) AS q;

-- name: job_insert_many_unique :many
-- job_insert_many for batches with a unique job: the same statement plus ON CONFLICT, so
-- that a row whose unique key is held inserts nothing. Keep the two in step.
INSERT INTO {schema}.jobs (
    kind, queue, args, state, priority, max_attempts, run_at, tags, metadata,
    unique_key, unique_states, ordering_key,
    trigger_job_id, trigger_run_lease, trigger_outcome, trigger_spec
)
SELECT
    r.kind, r.queue, r.args, r.state::{schema}.job_state, r.priority::smallint,
    r.max_attempts::int, coalesce(r.run_at::timestamptz, now()),
    CASE WHEN jsonb_array_length(r.tags) > 0
        THEN ARRAY(SELECT jsonb_array_elements_text(r.tags)) ELSE '{}' END,
    coalesce(r.metadata, '{}'), decode(r.unique_key, 'hex'),
    CASE jsonb_typeof(r.unique_states) WHEN 'array' THEN
        ARRAY(SELECT s::{schema}.job_state FROM jsonb_array_elements_text(r.unique_states) AS s)
    END,
    r.ordering_key, (r.trigger ->> 0)::bigint, (r.trigger ->> 1)::bigint, r.trigger ->> 2,
    r.trigger ->> 3
FROM ROWS FROM (
    jsonb_array_elements_text(%(kind)s::jsonb),
    jsonb_array_elements_text(%(queue)s::jsonb),
    jsonb_array_elements(%(args)s::jsonb),
    jsonb_array_elements_text(%(state)s::jsonb),
    jsonb_array_elements_text(%(priority)s::jsonb),
    jsonb_array_elements_text(%(max_attempts)s::jsonb),
    jsonb_array_elements_text(%(run_at)s::jsonb),
    jsonb_array_elements(%(tags)s::jsonb),
    jsonb_array_elements(%(metadata)s::jsonb),
    jsonb_array_elements_text(%(unique_key)s::jsonb),
    jsonb_array_elements(%(unique_states)s::jsonb),
    jsonb_array_elements_text(%(ordering_key)s::jsonb),
    jsonb_array_elements(%(trigger)s::jsonb)
) WITH ORDINALITY AS r(
    kind, queue, args, state, priority, max_attempts, run_at, tags, metadata,
    unique_key, unique_states, ordering_key, trigger, ord
)
ORDER BY r.ord
ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states)
DO NOTHING
RETURNING
    id, run_at, created_at, unique_key,
    CASE WHEN state = 'available' THEN pg_notify(%(channel)s, queue) END;

-- name: job_get_by_unique_key :one
-- The job that currently holds a unique key.
SELECT * FROM {schema}.jobs
WHERE unique_key = %(unique_key)s AND unique_key IS NOT NULL AND state = ANY (unique_states)
LIMIT 1;

-- name: job_get :one
SELECT * FROM {schema}.jobs WHERE id = %(id)s;

-- name: job_complete_by_caller :one
-- A handler's completion of its own attempt, in the handler's transaction (completion
-- "caller"): the same columns a worker's completion writes (job_finalize_many), guarded
-- the same way, by the attempt and the row still running. No row: the attempt is stale
-- (rescued, cancelled, or completed already), and the caller's transaction must not commit.
UPDATE {schema}.jobs AS j
SET state = 'completed',
    finalized_at = now(),
    heartbeat_at = NULL,
    deadline_at = NULL,
    progress = NULL,
    callback_id = NULL,
    callback_timeout_at = NULL,
    callback_result = NULL
WHERE j.id = %(id)s AND j.run_lease = %(run_lease)s AND j.state = 'running'
RETURNING j.*;

-- name: job_get_attempt :one
-- A job as its attempt (id, run_lease) left it, whatever its state.
SELECT * FROM {schema}.jobs WHERE id = %(id)s AND run_lease = %(run_lease)s;

-- name: job_list :many
-- Newest first, filtered; page with before_id (after_id bounds the ids from below). Run
-- unprepared (a plan per call, made for the parameters given): a generic plan could not
-- drop the filters that are not given, and would neither walk jobs_state_idx nor turn the
-- time bounds into primary-key bounds.
--
-- The state parameter is typed as the enum in both places: typed text, it reached the
-- comparison as a text-to-enum cast the planner cannot estimate, and a filter on a rare
-- state scanned the whole table instead of jobs_state_idx (30 ms against 0.02 ms over
-- 300,000 completed jobs).
--
-- No index serves created_at or kind (every insert and update would pay for one). Ids
-- follow creation order closely, so a time bound becomes an id bound first: `probe` binary
-- searches the primary key for each bound given, in this one statement. A step probes
-- the first row at or after the middle of [lo, hi) (`f`): created before the target, the
-- answer lies after that row (lo moves past it, across any hole left by deleted rows);
-- else it lies at or before the middle. At most ~64 steps, one index probe each; lo and
-- hi are numeric so that no step overflows a bigint. The answer is the first id from which
-- rows are created at or after the target. Each target is the bound moved out by
-- %(slack)s seconds, so that a row whose transaction began shortly before it inserted
-- (created_at is the transaction's start) is still inside the id range; the exact
-- created_at predicate then keeps only rows within the bounds. See
-- wai._admin.TIME_BOUND_SLACK for what can still be missed.
--
-- search: %(search_id)s is the job id a decimal search names (NULL when it names none);
-- %(search_like)s the LIKE pattern of the text, wildcards escaped, matched against the
-- kind lower-cased in the C collation (ASCII letters only: a kind wai accepts is ASCII),
-- which costs a third of ILIKE per row.
WITH RECURSIVE probe AS (
    SELECT t.bound, t.target,
           (SELECT min(id) FROM {schema}.jobs)::numeric AS lo,
           (SELECT max(id) FROM {schema}.jobs)::numeric + 1 AS hi
    FROM (VALUES
        ('after', %(created_after)s::timestamptz - make_interval(secs => %(slack)s::float8)),
        ('before', %(created_before)s::timestamptz + make_interval(secs => %(slack)s::float8))
    ) AS t(bound, target)
    WHERE t.target IS NOT NULL
    UNION ALL
    SELECT p.bound, p.target,
           CASE WHEN f.created_at < p.target THEN f.id::numeric + 1 ELSE p.lo END,
           CASE WHEN f.created_at < p.target THEN p.hi ELSE p.lo + div(p.hi - p.lo, 2) END
    FROM probe AS p
    LEFT JOIN LATERAL (
        SELECT j.id, j.created_at FROM {schema}.jobs AS j
        WHERE j.id >= (p.lo + div(p.hi - p.lo, 2))::bigint
        ORDER BY j.id
        LIMIT 1
    ) AS f ON true
    WHERE p.lo < p.hi
)
SELECT * FROM {schema}.jobs
WHERE (%(state)s::{schema}.job_state IS NULL OR state = %(state)s::{schema}.job_state)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(tag)s::text IS NULL OR tags @> ARRAY[%(tag)s::text])
  AND (%(trigger_job_id)s::bigint IS NULL OR trigger_job_id = %(trigger_job_id)s::bigint)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
  AND (%(after_id)s::bigint IS NULL OR id > %(after_id)s::bigint)
  AND (%(created_after)s::timestamptz IS NULL
       OR (created_at >= %(created_after)s::timestamptz
           AND id >= (SELECT least(p.hi, 9223372036854775807)::bigint FROM probe AS p
                      WHERE p.bound = 'after' AND p.lo >= p.hi)))
  AND (%(created_before)s::timestamptz IS NULL
       OR (created_at < %(created_before)s::timestamptz
           AND id <= (SELECT (p.hi - 1)::bigint FROM probe AS p
                      WHERE p.bound = 'before' AND p.lo >= p.hi)))
  AND (%(search_like)s::text IS NULL
       OR id = %(search_id)s::bigint
       OR lower(kind COLLATE "C") LIKE %(search_like)s::text)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: job_claim :many
-- Lock up to %(limit)s available jobs of a queue in claim order and start an attempt on each:
-- the claim of a queue without flow control (job_claim_limited claims the others).
-- A paused queue claims nothing, and neither does one under flow control (one primary-key
-- probe of the queues table); its claims take the queue's lock first (queue_flow_lock).
-- A job with an ordering key starts only if its key_turns row goes in (ON CONFLICT DO
-- NOTHING: one attempt per key at once, even against a claim whose snapshot predates
-- ours; a job that loses that race stays available, its batch goes on).
-- The update finds the picked rows through `id = ANY (ARRAY(...))`, which only a
-- primary-key probe per row satisfies, so that a generic plan of the prepared statement
-- never joins the picked ids to a scan of the table. RETURNING lists wai.job.ROW_COLUMNS,
-- in their order (JobRow.from_row).
WITH picked AS (
    SELECT r.id, r.ordering_key
    -- One lane (priority) after the other, each walked in ready order from its floor
    -- (%(floors)s, one per priority: wai.worker._floors), so that no claim visits the
    -- entries of the jobs taken before it, dead but not yet vacuumed. The nested loop
    -- over the lanes yields them in this order, and the LIMIT stops it.
    FROM unnest('{1,2,3,4}'::smallint[], %(floors)s::bigint[]) AS l(priority, floor)
    CROSS JOIN LATERAL (
        SELECT j.id, j.ordering_key FROM {schema}.jobs AS j
        WHERE j.state = 'available' AND j.queue = %(queue)s AND j.priority = l.priority
          AND j.ready_seq >= l.floor
          -- A job with an ordering key only when it is its key's turn: no earlier job of
          -- its key is unfinished (jobs_ordering_idx; ordering_key IS NULL spares the
          -- other jobs the probe).
          AND (j.ordering_key IS NULL OR NOT EXISTS (
              SELECT 1 FROM {schema}.jobs AS o
              WHERE o.queue = j.queue AND o.ordering_key = j.ordering_key AND o.id < j.id
                AND o.state IN ('scheduled', 'available', 'running', 'retryable',
                                'waiting_external')
                AND (o.state <> 'retryable'
                     OR coalesce((SELECT q.retry_holds_key FROM {schema}.queues AS q
                                  WHERE q.name = %(queue)s), true))))
        -- jobs_ready_idx: an index walk that stops at the LIMIT. SKIP LOCKED: concurrent
        -- claims pass over each other's rows instead of waiting on them.
        ORDER BY j.ready_seq
        LIMIT %(limit)s
        FOR UPDATE OF j SKIP LOCKED
    ) AS r
    WHERE NOT EXISTS (
        SELECT 1 FROM {schema}.queues AS q
        WHERE q.name = %(queue)s
          AND (q.paused OR q.rate_limit IS NOT NULL OR q.global_concurrency IS NOT NULL
               OR q.has_kind_limits))
    LIMIT %(limit)s
),
turns AS (
    INSERT INTO {schema}.key_turns AS t (queue, ordering_key, job_id)
    SELECT %(queue)s, p.ordering_key, p.id FROM picked AS p WHERE p.ordering_key IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING t.job_id
)
UPDATE {schema}.jobs AS j
-- The statement's time, not the transaction's: a limited claim's transaction started
-- before it waited for the queue's lock, and attempted_at is the time its tokens count.
SET state = 'running',
    attempt = j.attempt + 1,
    run_lease = j.run_lease + 1,
    attempted_at = statement_timestamp(),
    heartbeat_at = statement_timestamp(),
    -- The kind's own deadline (its task's), else the queue's; NULL (none) leaves it NULL.
    deadline_at = statement_timestamp() + make_interval(secs => coalesce(
        (SELECT d.seconds FROM unnest(%(deadline_kinds)s::text[], %(deadline_seconds)s::float8[])
             AS d(kind, seconds) WHERE d.kind = j.kind),
        %(default_deadline)s::float8
    ))
WHERE j.id = ANY (ARRAY(
    SELECT p.id FROM picked AS p WHERE p.ordering_key IS NULL
    UNION ALL
    SELECT t.job_id FROM turns AS t))
RETURNING
    j.id, j.kind, j.queue, j.args::text, j.state, j.priority, j.attempt, j.max_attempts,
    j.run_at, j.attempted_at, j.heartbeat_at, j.deadline_at, j.finalized_at, j.created_at,
    j.errors::text, j.metadata::text, j.tags, j.unique_key, j.ordering_key, j.callback_id,
    j.callback_timeout_at, j.run_lease, j.progress::text, j.trigger_job_id,
    j.trigger_run_lease, j.trigger_outcome, j.trigger_spec, j.callback_result::text;

-- name: job_ready_seq_read :one
-- The first statement of a floor probe (wai.worker._floors): the highest number
-- jobs_ready_seq has handed out. Sequences are not transactional: this is the latest
-- value, whoever took it.
SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END
FROM {schema}.jobs_ready_seq;

-- name: job_ready_xid :one
-- The second statement of a floor probe, in the same transaction, which then ends (it
-- writes nothing): a transaction id for it, greater than the id of every transaction that took a
-- number job_ready_seq_read saw (each took its id before its number), and the end of the
-- WAL, past the sequence's record of that number.
SELECT pg_current_xact_id()::text, pg_current_wal_insert_lsn()::text;

-- name: job_ready_fronts :one
-- The last statement of a floor probe, in a new transaction and snapshot: for each lane
-- (priority 1 to 4) the first available job at or above its floor, whoever may be
-- claiming it (a plain read, no SKIP LOCKED); the snapshot's xmin (every transaction
-- below it has ended); how far the WAL is flushed; and which server this is (a restart or
-- a failover starts the floors again).
SELECT
    ARRAY(
        SELECT (SELECT j.ready_seq FROM {schema}.jobs AS j
                WHERE j.queue = %(queue)s AND j.state = 'available'
                  AND j.priority = l.priority AND j.ready_seq >= l.floor
                ORDER BY j.ready_seq
                LIMIT 1)
        FROM unnest('{1,2,3,4}'::smallint[], %(floors)s::bigint[]) WITH ORDINALITY
            AS l(priority, floor, n)
        ORDER BY l.n
    ) AS fronts,
    pg_snapshot_xmin(pg_current_snapshot())::text AS xmin,
    pg_current_wal_flush_lsn()::text AS flushed,
    pg_postmaster_start_time()::text AS server;

-- name: job_claim_limited :many
-- job_claim for a queue under flow control, run after queue_flow_lock in one transaction,
-- so that this statement's snapshot sees every claim of the queue before it. Its rate
-- limit (a token bucket in its queues row), the rate limits of its kinds (kind_limits) and
-- its global concurrency cap the batch, and the tokens taken leave the buckets. Jobs of a
-- kind whose bucket holds no whole token are passed over, not waited for.
WITH flow AS MATERIALIZED (
    SELECT q.paused,
           q.rate_limit,
           -- The bucket now: what it held at rate_at plus the refill since, at most the burst.
           -- Counted from the statement's start, which comes after the lock: claims
           -- serialized by it see their times in order (now(), the transaction's start,
           -- may not).
           least(q.rate_burst::float8, coalesce(q.rate_tokens, q.rate_burst::float8)
                 + q.rate_limit / q.rate_per
                   * greatest(0, extract(epoch FROM statement_timestamp()
                                               - coalesce(q.rate_at, statement_timestamp()))))
               AS tokens,
           q.global_concurrency
    FROM {schema}.queues AS q
    WHERE q.name = %(queue)s
),
kinds AS MATERIALIZED (
    SELECT k.kind,
           least(k.rate_burst::float8, coalesce(k.rate_tokens, k.rate_burst::float8)
                 + k.rate_limit / k.rate_per
                   * greatest(0, extract(epoch FROM statement_timestamp()
                                               - coalesce(k.rate_at, statement_timestamp()))))
               AS tokens
    FROM {schema}.kind_limits AS k
    WHERE k.queue = %(queue)s
),
spent_kinds AS MATERIALIZED (
    -- Kinds without a whole token: the walk passes over their jobs rather than stop at them.
    SELECT coalesce(array_agg(k.kind), '{}') AS kinds FROM kinds AS k WHERE k.tokens < 1
),
cap AS MATERIALIZED (
    -- How many jobs flow control lets this claim take.
    SELECT CASE WHEN coalesce(f.paused, false) THEN 0 ELSE greatest(0, least(
        %(limit)s,
        floor(f.tokens)::int,
        -- Attempts running now, waits in place for a callback included (their handler
        -- still holds a slot); rows of a crashed process count until rescued.
        CASE WHEN f.global_concurrency IS NOT NULL THEN f.global_concurrency - (
            SELECT count(*)::int FROM {schema}.jobs AS r
            WHERE r.queue = %(queue)s
              AND (r.state = 'running'
                   OR (r.state = 'waiting_external' AND r.heartbeat_at IS NOT NULL))) END))
    END AS n
    FROM (SELECT 1) AS one LEFT JOIN flow AS f ON true
),
picked AS (
    -- The lanes walked from their floors, as in job_claim.
    SELECT r.id, r.kind, r.priority, r.ready_seq, r.ordering_key
    FROM unnest('{1,2,3,4}'::smallint[], %(floors)s::bigint[]) AS l(priority, floor)
    CROSS JOIN LATERAL (
        SELECT j.id, j.kind, j.priority, j.ready_seq, j.ordering_key FROM {schema}.jobs AS j
        WHERE j.state = 'available' AND j.queue = %(queue)s AND j.priority = l.priority
          AND j.ready_seq >= l.floor
          -- A CASE, which the planner gives an even chance: `kind <> ALL (...)`, estimated
          -- from the kinds' statistics, may look so selective that it scans and sorts the
          -- whole queue rather than walk the index to the LIMIT.
          AND CASE WHEN j.kind = ANY ((SELECT s.kinds FROM spent_kinds AS s)::text[])
                   THEN false ELSE true END
          -- A job with an ordering key only when it is its key's turn (as in job_claim).
          AND (j.ordering_key IS NULL OR NOT EXISTS (
              SELECT 1 FROM {schema}.jobs AS o
              WHERE o.queue = j.queue AND o.ordering_key = j.ordering_key AND o.id < j.id
                AND o.state IN ('scheduled', 'available', 'running', 'retryable',
                                'waiting_external')
                AND (o.state <> 'retryable'
                     OR coalesce((SELECT q.retry_holds_key FROM {schema}.queues AS q
                                  WHERE q.name = %(queue)s), true))))
        ORDER BY j.ready_seq
        LIMIT %(limit)s
        FOR UPDATE OF j SKIP LOCKED
    ) AS r
    WHERE (SELECT n FROM cap) > 0
    LIMIT %(limit)s
),
chosen AS MATERIALIZED (
    SELECT p.id, p.kind, p.ordering_key FROM picked AS p
    -- A rate-limited kind takes as many jobs as its bucket holds whole tokens: a job is
    -- passed over when its rank among the picked jobs of its kind exceeds them.
    WHERE NOT EXISTS (
        SELECT 1 FROM kinds AS k
        WHERE k.kind = p.kind
          AND k.tokens < (SELECT count(*) FROM picked AS o
                          WHERE o.kind = p.kind
                            AND (o.priority, o.ready_seq) <= (p.priority, p.ready_seq)))
    ORDER BY p.priority, p.ready_seq
    LIMIT (SELECT n FROM cap)
),
turns AS (
    INSERT INTO {schema}.key_turns AS t (queue, ordering_key, job_id)
    SELECT %(queue)s, c.ordering_key, c.id FROM chosen AS c WHERE c.ordering_key IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING t.job_id
),
taken AS MATERIALIZED (
    -- The jobs this claim starts (all locked by it: each of them is updated below).
    SELECT c.id, c.kind FROM chosen AS c
    WHERE c.ordering_key IS NULL OR c.id IN (SELECT t.job_id FROM turns AS t)
),
spent AS (
    UPDATE {schema}.queues AS q
    SET rate_tokens = f.tokens - (SELECT count(*) FROM taken),
        rate_at = greatest(statement_timestamp(), coalesce(q.rate_at, statement_timestamp()))
    FROM flow AS f
    WHERE q.name = %(queue)s AND q.rate_limit IS NOT NULL
),
spent_by_kind AS (
    UPDATE {schema}.kind_limits AS k
    SET rate_tokens = b.tokens - (SELECT count(*) FROM taken AS t WHERE t.kind = b.kind),
        rate_at = greatest(statement_timestamp(), coalesce(k.rate_at, statement_timestamp()))
    FROM kinds AS b
    WHERE k.queue = %(queue)s AND k.kind = b.kind
)
UPDATE {schema}.jobs AS j
-- The statement's time, not the transaction's: a limited claim's transaction started
-- before it waited for the queue's lock, and attempted_at is the time its tokens count.
SET state = 'running',
    attempt = j.attempt + 1,
    run_lease = j.run_lease + 1,
    attempted_at = statement_timestamp(),
    heartbeat_at = statement_timestamp(),
    -- The kind's own deadline (its task's), else the queue's; NULL (none) leaves it NULL.
    deadline_at = statement_timestamp() + make_interval(secs => coalesce(
        (SELECT d.seconds FROM unnest(%(deadline_kinds)s::text[], %(deadline_seconds)s::float8[])
             AS d(kind, seconds) WHERE d.kind = j.kind),
        %(default_deadline)s::float8
    ))
WHERE j.id = ANY (ARRAY(SELECT t.id FROM taken AS t))
RETURNING
    j.id, j.kind, j.queue, j.args::text, j.state, j.priority, j.attempt, j.max_attempts,
    j.run_at, j.attempted_at, j.heartbeat_at, j.deadline_at, j.finalized_at, j.created_at,
    j.errors::text, j.metadata::text, j.tags, j.unique_key, j.ordering_key, j.callback_id,
    j.callback_timeout_at, j.run_lease, j.progress::text, j.trigger_job_id,
    j.trigger_run_lease, j.trigger_outcome, j.trigger_spec, j.callback_result::text;

-- name: queue_flow_lock :one
-- Take a limited queue's claim lock (its queues row) for the rest of the transaction, and
-- read its limits. Claims of the queue wait for each other here, so that the claim that
-- follows (job_claim with limited) sees every attempt started before it. No row: the queue
-- is no longer under flow control.
SELECT q.rate_limit, q.rate_per, q.rate_burst, q.global_concurrency
FROM {schema}.queues AS q
WHERE q.name = %(queue)s
  AND (q.rate_limit IS NOT NULL OR q.global_concurrency IS NOT NULL OR q.has_kind_limits)
FOR NO KEY UPDATE;

-- name: queue_flow_after :one
-- A limited queue as its claim left it (same transaction, so the claim's own writes show):
-- the bucket's tokens and the attempts running, each only when that limit is set, and how
-- long until a kind whose bucket the claim emptied may be claimed again.
SELECT
    CASE WHEN q.rate_limit IS NOT NULL THEN q.rate_tokens END,
    CASE WHEN q.global_concurrency IS NOT NULL THEN (
        SELECT count(*)::int FROM {schema}.jobs AS r
        WHERE r.queue = q.name
          AND (r.state = 'running'
               OR (r.state = 'waiting_external' AND r.heartbeat_at IS NOT NULL)))
    END,
    statement_timestamp(),
    -- Seconds until the first of its spent kinds' buckets holds a whole token again.
    (SELECT min((1 - coalesce(k.rate_tokens, k.rate_burst::float8)) * k.rate_per / k.rate_limit)
     FROM {schema}.kind_limits AS k
     WHERE k.queue = q.name AND coalesce(k.rate_tokens, k.rate_burst::float8) < 1)
FROM {schema}.queues AS q
WHERE q.name = %(queue)s;

-- name: queue_flow_settings :one
-- Whether a queue is under flow control: a rate limit, a global concurrency or a rate limit
-- of one of its kinds (no row: never configured).
SELECT q.rate_limit IS NOT NULL OR q.global_concurrency IS NOT NULL OR q.has_kind_limits
FROM {schema}.queues AS q
WHERE q.name = %(queue)s;

-- name: job_finalize_many :many
-- Apply a batch of attempt outcomes, each guarded by its attempt: (id, run_lease) and the
-- row still running (or waiting in place for a callback: waiting_external with a
-- heartbeat). A park (state waiting_external) also needs state running and the callback
-- id the handler registered: a resolution that beat the park leaves it nothing to match.
-- Every other outcome clears the callback. Stale attempts are left out of the result.
-- An array that would hold only NULLs (or only false, or zeros for attempt_delta) comes as
-- NULL, which unnest pads: most batches are plain completions. The three arrays every
-- batch fills go in binary (a %(name)b placeholder): psycopg builds a binary array of ints or strings at
-- a third of the cost of its text form, which scans each element for quoting.
-- The state guard is wrapped in IS TRUE so that no plan can answer it from the partial
-- indexes on running and waiting rows: every plan, generic or custom and whatever the
-- statistics say, probes the primary key once per outcome (a generic plan would otherwise
-- scan every running row, hash them and join). RETURNING lists wai.job.ROW_COLUMNS, in their order (JobRow.from_row): the rows that
-- follow-up specs and on_event hooks are handed.
-- An outcome whose follow-ups were planned before the write carries its timestamps (at,
-- run_at: the server time the worker estimated), so that the row its closures saw is the
-- row that commits; the error entry's at is then formatted in UTC, as the worker formats
-- it (wai.outcomes.error_timestamp). Other outcomes use now().
UPDATE {schema}.jobs AS j
SET state = o.state::{schema}.job_state,
    attempt = j.attempt + coalesce(o.attempt_delta, 0),
    run_at = CASE WHEN o.run_at IS NOT NULL THEN o.run_at
                  WHEN o.delay IS NULL THEN j.run_at
                  ELSE now() + make_interval(secs => o.delay) END,
    finalized_at = CASE WHEN o.state IN ('completed', 'failed', 'cancelled')
                        THEN coalesce(o.at, now()) END,
    heartbeat_at = NULL,
    deadline_at = NULL,
    errors = CASE WHEN o.error IS NULL THEN j.errors
                  ELSE j.errors || jsonb_build_array(
                      jsonb_build_object('error', o.error, 'attempt', j.attempt, 'at',
                          CASE WHEN o.at IS NULL THEN to_jsonb(now())
                               ELSE to_jsonb(to_char(o.at AT TIME ZONE 'UTC',
                                   'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')) END)
                      || CASE WHEN o.terminal THEN '{"terminal": true}'::jsonb
                              ELSE '{}'::jsonb END) END,
    progress = CASE WHEN o.state = 'completed' THEN NULL
                    ELSE coalesce(o.progress::jsonb, j.progress) END,
    callback_id = CASE WHEN o.state = 'waiting_external' THEN j.callback_id END,
    callback_timeout_at = CASE WHEN o.state = 'waiting_external' THEN j.callback_timeout_at END,
    callback_result = CASE WHEN o.state = 'waiting_external' THEN j.callback_result END
FROM unnest(
    %(id)b::bigint[], %(run_lease)b::bigint[], %(state)b::text[], %(delay)s::float8[],
    %(error)s::text[], %(terminal)s::bool[], %(attempt_delta)s::int[], %(progress)s::text[],
    %(callback_id)s::uuid[], %(at)s::timestamptz[], %(run_at)s::timestamptz[]
) AS o(id, run_lease, state, delay, error, terminal, attempt_delta, progress, callback_id,
       at, run_at)
WHERE j.id = o.id AND j.run_lease = o.run_lease
  AND (j.state = 'running'
       OR (j.state = 'waiting_external' AND j.heartbeat_at IS NOT NULL
           AND o.state <> 'waiting_external')) IS TRUE
  AND (o.state <> 'waiting_external' OR j.callback_id = o.callback_id)
RETURNING
    j.id, j.kind, j.queue, j.args::text, j.state, j.priority, j.attempt, j.max_attempts,
    j.run_at, j.attempted_at, j.heartbeat_at, j.deadline_at, j.finalized_at, j.created_at,
    j.errors::text, j.metadata::text, j.tags, j.unique_key, j.ordering_key, j.callback_id,
    j.callback_timeout_at, j.run_lease, j.progress::text, j.trigger_job_id,
    j.trigger_run_lease, j.trigger_outcome, j.trigger_spec, j.callback_result::text;

-- name: job_finalize_many_ids :many
-- job_finalize_many for a batch whose rows nobody reads (no follow-up spec and no on_event
-- hook for any of its jobs): the same update, returning only the id and new state of each
-- row it changed, so no row travels back to be decoded. Keep the two in step.
UPDATE {schema}.jobs AS j
SET state = o.state::{schema}.job_state,
    attempt = j.attempt + coalesce(o.attempt_delta, 0),
    run_at = CASE WHEN o.run_at IS NOT NULL THEN o.run_at
                  WHEN o.delay IS NULL THEN j.run_at
                  ELSE now() + make_interval(secs => o.delay) END,
    finalized_at = CASE WHEN o.state IN ('completed', 'failed', 'cancelled')
                        THEN coalesce(o.at, now()) END,
    heartbeat_at = NULL,
    deadline_at = NULL,
    errors = CASE WHEN o.error IS NULL THEN j.errors
                  ELSE j.errors || jsonb_build_array(
                      jsonb_build_object('error', o.error, 'attempt', j.attempt, 'at',
                          CASE WHEN o.at IS NULL THEN to_jsonb(now())
                               ELSE to_jsonb(to_char(o.at AT TIME ZONE 'UTC',
                                   'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')) END)
                      || CASE WHEN o.terminal THEN '{"terminal": true}'::jsonb
                              ELSE '{}'::jsonb END) END,
    progress = CASE WHEN o.state = 'completed' THEN NULL
                    ELSE coalesce(o.progress::jsonb, j.progress) END,
    callback_id = CASE WHEN o.state = 'waiting_external' THEN j.callback_id END,
    callback_timeout_at = CASE WHEN o.state = 'waiting_external' THEN j.callback_timeout_at END,
    callback_result = CASE WHEN o.state = 'waiting_external' THEN j.callback_result END
FROM unnest(
    %(id)b::bigint[], %(run_lease)b::bigint[], %(state)b::text[], %(delay)s::float8[],
    %(error)s::text[], %(terminal)s::bool[], %(attempt_delta)s::int[], %(progress)s::text[],
    %(callback_id)s::uuid[], %(at)s::timestamptz[], %(run_at)s::timestamptz[]
) AS o(id, run_lease, state, delay, error, terminal, attempt_delta, progress, callback_id,
       at, run_at)
WHERE j.id = o.id AND j.run_lease = o.run_lease
  AND (j.state = 'running'
       OR (j.state = 'waiting_external' AND j.heartbeat_at IS NOT NULL
           AND o.state <> 'waiting_external')) IS TRUE
  AND (o.state <> 'waiting_external' OR j.callback_id = o.callback_id)
RETURNING j.id, j.state::text;

-- name: job_heartbeat_many :many
-- Refresh the heartbeat (and any pending progress) of live attempts; returns the live ones.
-- An attempt waiting in place for its callback (waiting_external with a heartbeat) is live.
UPDATE {schema}.jobs AS j
SET heartbeat_at = now(),
    progress = coalesce(h.progress::jsonb, j.progress)
FROM unnest(%(id)s::bigint[], %(run_lease)s::bigint[], %(progress)s::text[])
    AS h(id, run_lease, progress)
WHERE j.id = h.id AND j.run_lease = h.run_lease
  AND (j.state = 'running' OR (j.state = 'waiting_external' AND j.heartbeat_at IS NOT NULL))
      IS TRUE -- a primary-key probe per attempt in every plan (see job_finalize_many)
RETURNING j.id, j.run_lease;

-- name: job_heartbeat_finished :many
-- Keep the heartbeat of attempts whose handler returned while their outcome waits to be
-- written, so rescue leaves finished work alone. Never waits on a lock: a row locked by
-- the finalizer (being written right now) needs no heartbeat, and waiting on it could
-- deadlock with a batch that locks several rows. Progress is left alone (the outcome
-- carries its own); the deadline is cleared: it bounded the handler, which returned, and
-- must not get finished work rescued either.
UPDATE {schema}.jobs AS j
SET heartbeat_at = now(),
    deadline_at = NULL
FROM (
    SELECT f.id
    FROM unnest(%(id)s::bigint[], %(run_lease)s::bigint[]) AS h(id, run_lease)
    JOIN {schema}.jobs AS f ON f.id = h.id
    WHERE f.run_lease = h.run_lease
      AND (f.state = 'running') IS TRUE -- a primary-key probe per attempt (see job_heartbeat_many)
    FOR UPDATE OF f SKIP LOCKED
) AS free
WHERE j.id = free.id
RETURNING j.id;

-- name: job_promote_due :one
-- Make due scheduled and retryable jobs available and wake their queues.
WITH due AS (
    SELECT id FROM {schema}.jobs
    WHERE state IN ('scheduled', 'retryable') AND run_at <= now()
    -- Oldest due first along jobs_due_idx; a row locked elsewhere (an operator's action) is
    -- skipped, not waited for: the next pass takes it.
    ORDER BY run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
promoted AS (
    UPDATE {schema}.jobs AS j SET state = 'available'
    FROM due WHERE j.id = due.id
    RETURNING j.queue
),
notified AS (
    SELECT pg_notify(%(channel)s, q.queue) FROM (SELECT DISTINCT queue FROM promoted) AS q
)
-- One row: the jobs promoted per queue, and how many seconds until the next scheduled or
-- retryable job is due, by the database clock (NULL: none is; 0 or less: one is due now,
-- left by this pass's limit or locked elsewhere). The statement's snapshot still sees the
-- promoted rows as they were: they are left out by id. First entries of jobs_due_idx.
SELECT
    coalesce((SELECT jsonb_object_agg(c.queue, c.n)
              FROM (SELECT queue, count(*) AS n FROM promoted GROUP BY queue) AS c), '{}'),
    extract(epoch FROM (SELECT min(j.run_at) FROM {schema}.jobs AS j
                        WHERE j.state IN ('scheduled', 'retryable')
                          AND j.id NOT IN (SELECT id FROM due)) - now())::float8
-- Always true: counting a SELECT CTE runs it whole; one never read would send no NOTIFY.
WHERE (SELECT count(*) FROM notified) >= 0;

-- name: job_rescue_lock :many
-- Lock a batch of attempts whose worker is presumed dead (stale heartbeat, also of a
-- handler waiting in place for its callback), that outlived their deadline, or whose
-- external callback timed out, with the reason of each. wai.transitions decides what each
-- becomes and writes it with job_rescue_apply in the same transaction.
SELECT id, attempt, max_attempts,
       CASE WHEN state = 'waiting_external' AND callback_timeout_at < now()
                THEN 'callback_timeout'
            WHEN state = 'running'
                 AND deadline_at < now() - make_interval(secs => %(deadline_grace)s)
                THEN 'deadline_exceeded'
            ELSE 'stale_heartbeat' END AS reason
FROM {schema}.jobs
WHERE (state = 'running'
       AND (heartbeat_at < now() - make_interval(secs => %(staleness)s)
            OR deadline_at < now() - make_interval(secs => %(deadline_grace)s)))
   OR (state = 'waiting_external'
       AND (callback_timeout_at < now()
            OR heartbeat_at < now() - make_interval(secs => %(staleness)s)))
-- Locked in id order, the order queue_drain locks in too. SKIP LOCKED: a row being written
-- (an outcome, or the orphaned statement of a dead worker) is not waited for; the next pass
-- re-checks it.
ORDER BY id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: job_rescue_apply :many
-- Close the attempts job_rescue_lock locked in this transaction: retryable after
-- %(delay)s seconds, or failed (delay NULL) when that attempt was the last one. The error
-- entry records the rescue's reason.
UPDATE {schema}.jobs AS j
SET state = r.state::{schema}.job_state,
    run_at = CASE WHEN r.delay IS NULL THEN j.run_at
                  ELSE now() + make_interval(secs => r.delay) END,
    finalized_at = CASE WHEN r.state = 'failed' THEN now() END,
    heartbeat_at = NULL,
    deadline_at = NULL,
    callback_id = NULL,
    callback_timeout_at = NULL,
    errors = j.errors || jsonb_build_array(jsonb_build_object(
        'error', r.error, 'attempt', j.attempt, 'at', now(), 'rescued', r.reason))
FROM unnest(%(id)s::bigint[], %(state)s::text[], %(delay)s::float8[], %(error)s::text[],
            %(reason)s::text[]) AS r(id, state, delay, error, reason)
WHERE j.id = r.id
RETURNING
    j.id, j.kind, j.queue, j.args::text, j.state, j.priority, j.attempt, j.max_attempts,
    j.run_at, j.attempted_at, j.heartbeat_at, j.deadline_at, j.finalized_at, j.created_at,
    j.errors::text, j.metadata::text, j.tags, j.unique_key, j.ordering_key, j.callback_id,
    j.callback_timeout_at, j.run_lease, j.progress::text, j.trigger_job_id,
    j.trigger_run_lease, j.trigger_outcome, j.trigger_spec, j.callback_result::text,
    r.reason;

-- name: job_lineage_up :many
-- The trigger chain of job %(id)s, nearest trigger first, at most %(limit)s jobs. A trigger
-- is always older than its follow-up (a smaller id), which the walk requires: it ends
-- even on a hand-edited cycle. The chain stops at a trigger retention has deleted.
WITH RECURSIVE up AS (
    SELECT j.* FROM {schema}.jobs AS j
    WHERE j.id = (SELECT trigger_job_id FROM {schema}.jobs WHERE id = %(id)s::bigint)
      AND j.id < %(id)s::bigint
    UNION ALL
    SELECT p.* FROM up AS u
    JOIN {schema}.jobs AS p ON p.id = u.trigger_job_id AND p.id < u.id
)
SELECT * FROM up LIMIT %(limit)s;

-- name: job_lineage_down :many
-- The follow-ups of job %(id)s and theirs, breadth first, at most %(limit)s jobs: each level
-- is one probe of jobs_trigger_idx per parent. A follow-up is always newer than its
-- trigger (a larger id), which the walk requires, so it ends; the outer LIMIT stops it
-- early on a wide tree.
WITH RECURSIVE down AS (
    SELECT j.* FROM {schema}.jobs AS j
    WHERE j.trigger_job_id = %(id)s::bigint AND j.id > %(id)s::bigint
    UNION ALL
    SELECT c.* FROM down AS d
    JOIN {schema}.jobs AS c ON c.trigger_job_id = d.id AND c.id > d.id
)
SELECT * FROM down LIMIT %(limit)s;

-- name: outbox_of_jobs :many
-- The outbox rows of these jobs: follow-ups their transitions still owe, oldest first.
SELECT o.id, o.job_id, o.run_lease, o.kind, o.outcome, o.detail, o.attempts, o.last_error,
       o.next_attempt_at, o.failed_at, o.created_at
FROM {schema}.outbox AS o
WHERE o.job_id = ANY (%(ids)s::bigint[])
ORDER BY o.id;

-- name: notify :exec
-- One note on a channel: a worker's LISTEN probe (wai.worker._notifier), sent over a
-- pooled connection so that it proves notes from the pool's side reach the listener.
SELECT pg_notify(%(channel)s, %(payload)s);
