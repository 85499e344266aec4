-- name: outbox_lock_due :many
-- Lock a batch of due outbox rows of the (kind, outcome) pairs this process holds specs
-- for, oldest first; rows another sweeper holds are skipped, and failed rows wait for an
-- operator.
SELECT o.* FROM {schema}.outbox AS o
JOIN unnest(%(kinds)s::text[], %(outcomes)s::text[]) AS s(kind, outcome)
    ON o.kind = s.kind AND o.outcome = s.outcome
WHERE o.next_attempt_at <= now() AND o.failed_at IS NULL
ORDER BY o.id
LIMIT %(limit)s
FOR UPDATE OF o SKIP LOCKED;

-- name: outbox_next_due :one
-- Seconds until the next pending outbox row of the given (kind, outcome) pairs is due by
-- the database clock (negative: due now; NULL: none is pending).
SELECT extract(epoch FROM min(o.next_attempt_at) - now())::float8
FROM {schema}.outbox AS o
JOIN unnest(%(kinds)s::text[], %(outcomes)s::text[]) AS s(kind, outcome)
    ON o.kind = s.kind AND o.outcome = s.outcome
WHERE o.failed_at IS NULL;

-- name: outbox_dispatched_specs :many
-- Specs already dispatched for one trigger attempt (lineage), so a retry skips them.
SELECT trigger_spec FROM {schema}.jobs
WHERE trigger_job_id = %(job_id)s AND trigger_run_lease = %(run_lease)s
  AND trigger_outcome = %(outcome)s;

-- name: outbox_delete :exec
DELETE FROM {schema}.outbox WHERE id = %(id)s;

-- name: outbox_backoff :exec
-- Record a failed dispatch and retry it %(delay)s seconds later (wai._retry decides); the
-- failure that reaches %(max_attempts)s attempts marks the row failed instead.
UPDATE {schema}.outbox
SET attempts = attempts + 1,
    last_error = %(error)s,
    next_attempt_at = now() + make_interval(secs => %(delay)s::float8),
    failed_at = CASE WHEN attempts + 1 >= %(max_attempts)s THEN now() END
WHERE id = %(id)s;

-- name: outbox_list :many
-- Outbox rows for operators, oldest first: %(state)s is NULL (every row), 'pending' or
-- 'failed'; %(kind)s NULL or one kind; only rows after %(after)s (an id) when given.
SELECT o.id, o.job_id, o.run_lease, o.kind, o.outcome, o.detail, o.attempts, o.last_error,
       o.next_attempt_at, o.failed_at, o.created_at
FROM {schema}.outbox AS o
WHERE (%(state)s::text IS NULL
       OR (%(state)s::text = 'pending' AND o.failed_at IS NULL)
       OR (%(state)s::text = 'failed' AND o.failed_at IS NOT NULL))
  AND (%(kind)s::text IS NULL OR o.kind = %(kind)s::text)
  AND (%(after)s::bigint IS NULL OR o.id > %(after)s::bigint)
ORDER BY o.id
LIMIT %(limit)s;

-- name: outbox_stats :one
-- How many outbox rows wait to be dispatched (pending) and how many gave up (failed), and
-- when the oldest pending row was created.
SELECT count(*) FILTER (WHERE failed_at IS NULL) AS pending,
       count(*) FILTER (WHERE failed_at IS NOT NULL) AS failed,
       min(created_at) FILTER (WHERE failed_at IS NULL) AS oldest_pending_at
FROM {schema}.outbox;

-- name: outbox_retry :one
-- An operator's retry: the row is due now, pending again, with a fresh attempt budget; its
-- last error stays until the next attempt replaces it or the row is dispatched.
UPDATE {schema}.outbox
SET attempts = 0, failed_at = NULL, next_attempt_at = now()
WHERE id = %(id)s
RETURNING id, job_id, run_lease, kind, outcome, detail, attempts, last_error,
          next_attempt_at, failed_at, created_at;

-- name: outbox_discard :one
-- An operator's discard: the row goes, and its follow-ups never fire. Returns its id.
DELETE FROM {schema}.outbox WHERE id = %(id)s RETURNING id;

-- name: outbox_insert_many :exec
-- Leave the outbox rows of transitions made in this transaction, one per job id, each with
-- its detail and a snapshot of the row as it is now. The key (job, run lease, outcome)
-- makes a second row for the same transition a no-op.
INSERT INTO {schema}.outbox (job_id, run_lease, kind, outcome, detail, job)
SELECT j.id, j.run_lease, j.kind, %(outcome)s::text, t.detail, to_jsonb(j)
FROM unnest(%(id)s::bigint[], %(detail)s::jsonb[]) AS t(id, detail)
JOIN {schema}.jobs AS j ON j.id = t.id
ORDER BY j.id
ON CONFLICT (job_id, run_lease, outcome) DO NOTHING;
