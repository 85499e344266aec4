-- The dead-letter queue: routing of failed jobs, operator moves, listing, retry, purge
-- and retention. An entry keeps the whole jobs row (`job`); a retry restores it under
-- the same id, run lease, errors, metadata and lineage, so the next claim starts a new
-- run lease and that attempt's follow-ups are new ones.
--
-- Filters: %(queue)s, %(kind)s, %(tag)s and %(reason)s narrow a listing or a bulk action
-- (NULL: any); %(ids)s names the entries of a one-job action (NULL: use the filters).
-- Bulk actions lock with SKIP LOCKED: two at once share out the rows instead of waiting.

-- name: dlq_route :many
-- Move jobs that just failed (in this transaction) to the dead-letter queue when their
-- queue has it on; %(reason)s[i] is why %(id)s[i] failed.
WITH moved AS (
    DELETE FROM {schema}.jobs AS j
    USING unnest(%(id)s::bigint[], %(reason)s::text[]) AS r(id, reason), {schema}.queues AS q
    WHERE j.id = r.id AND j.state = 'failed' AND q.name = j.queue AND q.dlq
    RETURNING j.*, r.reason AS dlq_reason
)
INSERT INTO {schema}.dlq (job_id, kind, queue, tags, reason, job)
SELECT m.id, m.kind, m.queue, m.tags, m.dlq_reason, to_jsonb(m) - 'dlq_reason'
FROM moved AS m
RETURNING job_id, reason;

-- name: dlq_move_one :one
-- Move one failed job to the dead-letter queue whatever its queue's policy (an operator
-- action). `prev_state` is NULL when there is no such job; `job_id` NULL when its state
-- is not failed.
WITH target AS (
    SELECT id, state AS prev_state FROM {schema}.jobs WHERE id = %(id)s::bigint FOR UPDATE
),
moved AS (
    DELETE FROM {schema}.jobs AS j
    USING target AS t
    WHERE j.id = t.id AND t.prev_state = 'failed'
    RETURNING j.*
),
entered AS (
    INSERT INTO {schema}.dlq (job_id, kind, queue, tags, reason, job)
    SELECT m.id, m.kind, m.queue, m.tags, %(reason)s::text, to_jsonb(m)
    FROM moved AS m
    RETURNING job_id
)
SELECT t.prev_state::text AS prev_state, e.job_id
FROM target AS t LEFT JOIN entered AS e ON true;

-- name: dlq_move_failed :one
-- Move up to %(limit)s failed jobs matching the filters to the dead-letter queue, oldest
-- id first; returns how many moved.
WITH picked AS (
    SELECT id FROM {schema}.jobs
    WHERE state = 'failed'
      AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
      AND (%(kind)s::text IS NULL OR kind = %(kind)s::text)
      AND (%(tag)s::text IS NULL OR tags @> ARRAY[%(tag)s::text])
    -- (state, id) is jobs_state_idx's order: with state fixed, an index walk up to the LIMIT.
    ORDER BY state, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
moved AS (
    DELETE FROM {schema}.jobs AS j
    USING picked AS p
    WHERE j.id = p.id AND j.state = 'failed'
    RETURNING j.*
),
entered AS (
    INSERT INTO {schema}.dlq (job_id, kind, queue, tags, reason, job)
    SELECT m.id, m.kind, m.queue, m.tags, %(reason)s::text, to_jsonb(m)
    FROM moved AS m
    RETURNING 1
)
SELECT count(*) AS moved FROM entered;

-- name: dlq_list :many
-- Entries newest first, filtered, after the cursor (%(before_at)s, %(before_id)s).
SELECT j.*, d.reason AS dlq_reason, d.dlq_at
FROM {schema}.dlq AS d,
     LATERAL jsonb_populate_record(NULL::{schema}.jobs, d.job) AS j
WHERE (%(queue)s::text IS NULL OR d.queue = %(queue)s::text)
  AND (%(kind)s::text IS NULL OR d.kind = %(kind)s::text)
  AND (%(tag)s::text IS NULL OR d.tags @> ARRAY[%(tag)s::text])
  AND (%(reason)s::text IS NULL OR d.reason = %(reason)s::text)
  AND (%(before_at)s::timestamptz IS NULL
       OR (d.dlq_at, d.job_id) < (%(before_at)s::timestamptz, %(before_id)s::bigint))
ORDER BY d.dlq_at DESC, d.job_id DESC
LIMIT %(limit)s;

-- name: dlq_get :one
SELECT j.*, d.reason AS dlq_reason, d.dlq_at
FROM {schema}.dlq AS d,
     LATERAL jsonb_populate_record(NULL::{schema}.jobs, d.job) AS j
WHERE d.job_id = %(id)s::bigint;

-- name: dlq_depth :many
-- Entries per queue.
SELECT queue, count(*) AS depth FROM {schema}.dlq GROUP BY queue ORDER BY queue;

-- name: dlq_count :one
-- Entries matching the filters (the total a bulk action will work through).
SELECT count(*) AS entries FROM {schema}.dlq AS d
WHERE (%(queue)s::text IS NULL OR d.queue = %(queue)s::text)
  AND (%(kind)s::text IS NULL OR d.kind = %(kind)s::text)
  AND (%(tag)s::text IS NULL OR d.tags @> ARRAY[%(tag)s::text])
  AND (%(reason)s::text IS NULL OR d.reason = %(reason)s::text);

-- name: dlq_now :one
-- The database clock: where a bulk retry stops (entries that arrive later are left).
SELECT now();

-- name: dlq_retry :many
-- Put up to %(limit)s entries back in the jobs table, oldest first after the cursor
-- (%(after_at)s, %(after_id)s) and up to %(until)s: attempt 0, optionally another queue, priority or run_at
-- (a future run_at makes it scheduled), same id, run lease, errors and lineage. An entry
-- whose unique key a live job holds stays in the dead-letter queue. One row per entry
-- looked at: `dlq_job_id` and `dlq_at` always, the restored job's columns when it was
-- restored (NULL otherwise).
WITH picked AS (
    SELECT d.job_id, d.dlq_at, d.job FROM {schema}.dlq AS d
    WHERE (%(ids)s::bigint[] IS NULL OR d.job_id = ANY (%(ids)s::bigint[]))
      AND (%(queue)s::text IS NULL OR d.queue = %(queue)s::text)
      AND (%(kind)s::text IS NULL OR d.kind = %(kind)s::text)
      AND (%(tag)s::text IS NULL OR d.tags @> ARRAY[%(tag)s::text])
      AND (%(reason)s::text IS NULL OR d.reason = %(reason)s::text)
      AND (%(after_at)s::timestamptz IS NULL
           OR (d.dlq_at, d.job_id) > (%(after_at)s::timestamptz, %(after_id)s::bigint))
      AND (%(until)s::timestamptz IS NULL OR d.dlq_at <= %(until)s::timestamptz)
    ORDER BY d.dlq_at, d.job_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
restored AS (
    -- OVERRIDING SYSTEM VALUE: the job comes back under its own id (GENERATED ALWAYS).
    INSERT INTO {schema}.jobs (
        id, kind, queue, args, state, priority, attempt, max_attempts, run_at,
        attempted_at, created_at, errors, metadata, tags, unique_key, unique_states,
        ordering_key, run_lease, progress,
        trigger_job_id, trigger_run_lease, trigger_outcome, trigger_spec
    ) OVERRIDING SYSTEM VALUE
    SELECT j.id, j.kind, coalesce(%(to_queue)s::text, j.queue), j.args,
           CASE WHEN %(run_at)s::timestamptz > now() THEN 'scheduled'::{schema}.job_state
                ELSE 'available'::{schema}.job_state END,
           coalesce(%(priority)s::smallint, j.priority), 0, j.max_attempts,
           coalesce(%(run_at)s::timestamptz, now()),
           j.attempted_at, j.created_at, j.errors, j.metadata, j.tags, j.unique_key,
           j.unique_states, j.ordering_key, j.run_lease, j.progress,
           j.trigger_job_id, j.trigger_run_lease, j.trigger_outcome, j.trigger_spec
    FROM picked AS p,
         LATERAL jsonb_populate_record(NULL::{schema}.jobs, p.job) AS j
    ORDER BY p.dlq_at, p.job_id
    -- No conflict target: an entry whose unique key a live job holds is skipped, and stays.
    ON CONFLICT DO NOTHING
    RETURNING *
),
removed AS (
    DELETE FROM {schema}.dlq AS d USING restored AS r WHERE d.job_id = r.id RETURNING 1
),
woken AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM restored WHERE state = 'available') AS q
)
SELECT p.job_id AS dlq_job_id, p.dlq_at AS dlq_at, r.*
FROM picked AS p LEFT JOIN restored AS r ON r.id = p.job_id
-- Always true: counting a SELECT CTE runs it whole; one never read would send no NOTIFY.
WHERE (SELECT count(*) FROM removed) >= 0 AND (SELECT count(*) FROM woken) >= 0
ORDER BY p.dlq_at, p.job_id;

-- name: dlq_purge :one
-- Delete up to %(limit)s entries (by %(ids)s, or matching the filters), oldest first;
-- returns how many.
WITH doomed AS (
    SELECT d.job_id FROM {schema}.dlq AS d
    WHERE (%(ids)s::bigint[] IS NULL OR d.job_id = ANY (%(ids)s::bigint[]))
      AND (%(queue)s::text IS NULL OR d.queue = %(queue)s::text)
      AND (%(kind)s::text IS NULL OR d.kind = %(kind)s::text)
      AND (%(tag)s::text IS NULL OR d.tags @> ARRAY[%(tag)s::text])
      AND (%(reason)s::text IS NULL OR d.reason = %(reason)s::text)
    ORDER BY d.dlq_at, d.job_id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
deleted AS (
    DELETE FROM {schema}.dlq AS d USING doomed WHERE d.job_id = doomed.job_id RETURNING 1
)
SELECT count(*) AS purged FROM deleted;

-- name: dlq_delete_expired :one
-- Retention: delete up to %(limit)s entries older than their queue's dlq_retention, else
-- %(retention)s seconds; returns how many.
WITH doomed AS (
    SELECT d.job_id FROM {schema}.dlq AS d
    LEFT JOIN {schema}.queues AS q ON q.name = d.queue
    WHERE d.dlq_at < now() - coalesce(q.dlq_retention,
                                      make_interval(secs => %(retention)s::float8))
    ORDER BY d.dlq_at, d.job_id
    LIMIT %(limit)s
    FOR UPDATE OF d SKIP LOCKED
),
deleted AS (
    DELETE FROM {schema}.dlq AS d USING doomed WHERE d.job_id = doomed.job_id RETURNING 1
)
SELECT count(*) AS deleted FROM deleted;
