-- name: job_claim_id :one
-- Claim one job by id, as job_claim claims a queue's next jobs: the same guard (an
-- available job, due, in a queue that is not paused) and the same attempt start (attempt
-- and run_lease bumped, attempted_at and heartbeat_at now, the deadline of its kind).
-- wai.testing.run_job: no row back means the job could not be claimed, and the caller
-- reads the row to say why. RETURNING lists wai.job.ROW_COLUMNS, in their order.
UPDATE {schema}.jobs AS j
SET state = 'running',
    attempt = j.attempt + 1,
    run_lease = j.run_lease + 1,
    attempted_at = now(),
    heartbeat_at = now(),
    deadline_at = now() + make_interval(secs => %(deadline)s::float8)
WHERE j.id = %(id)s
  AND j.state = 'available'
  AND j.run_at <= now()
  AND NOT EXISTS (SELECT 1 FROM {schema}.queues AS q WHERE q.name = j.queue AND q.paused)
RETURNING
    id, kind, queue, args::text, state, priority, attempt, max_attempts, run_at,
    attempted_at, heartbeat_at, deadline_at, finalized_at, created_at, errors::text,
    metadata::text, tags, unique_key, ordering_key, callback_id, callback_timeout_at,
    run_lease, progress::text, trigger_job_id, trigger_run_lease, trigger_outcome,
    trigger_spec, callback_result::text;

-- name: job_left_in_queues :many
-- The jobs of the given queues a worker would still run: available or running, or
-- scheduled or retryable and due (the promoter's next pass makes them available).
-- wai.testing.drain runs until this is empty, and lists it when it times out.
-- Due against clock_timestamp(), not now(): the transaction's start can precede the
-- snapshot by the statement's planning, and a retry due at once (RetryAfter(0)) committed
-- in between has a run_at after now() yet is visible, due, and must keep the drain going.
SELECT id, kind, queue, state::text, run_at
FROM {schema}.jobs
WHERE queue = ANY (%(queues)s::text[])
  AND (state IN ('available', 'running')
       OR (state IN ('scheduled', 'retryable') AND run_at <= clock_timestamp()))
ORDER BY id
LIMIT %(limit)s;

-- name: job_make_due :one
-- Make a scheduled or retryable job available now, as the promoter does once its run_at
-- has passed, with run_at moved to now: wai.testing.run_existing(..., due_now=True).
-- Returns its id, or no row when the job is in another state.
UPDATE {schema}.jobs
SET state = 'available', run_at = now()
WHERE id = %(id)s AND state IN ('scheduled', 'retryable')
RETURNING id;
