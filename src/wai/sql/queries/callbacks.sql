-- External callbacks: registration and in-place waits (guarded by the attempt's lease),
-- and the resolutions any process may send (guarded by the callback id).
--
-- A resolution matches `callback_id = <id>` in a state it applies to and clears the id,
-- so two racing resolutions apply once: the second re-checks the row after the first
-- commits, finds no such id and changes nothing. Every resolution notifies
-- `<schema>.callback` with {"job_id", "run_lease"}, the wakeup of a handler waiting in
-- place (it also polls).
--
-- A handler waiting in place (job.wait_for_callback) parks the row in `waiting_external`
-- but keeps heartbeating it: such a row has `heartbeat_at` set, while a row parked by
-- returning WaitForCallback has none. The attempt guard of heartbeats and outcomes
-- accepts the former, never the latter.

-- name: job_callback_register :one
-- Give the running attempt a fresh callback id, its timeout and CEL expressions.
UPDATE {schema}.jobs
SET callback_id = %(callback_id)s::uuid,
    callback_timeout_at = now() + make_interval(secs => %(timeout)s::float8),
    callback_filter = %(filter)s::text,
    callback_on_complete = %(on_complete)s::text,
    callback_on_fail = %(on_fail)s::text,
    callback_transform = %(transform)s::text,
    callback_result = NULL
WHERE id = %(id)s AND state = 'running' AND run_lease = %(run_lease)s
RETURNING callback_timeout_at;

-- name: job_callback_park_in_place :one
-- A handler starts waiting for its callback: waiting_external, heartbeat kept. Returns the
-- row, which the WaitingForCallback event and follow-ups of the wait are given.
UPDATE {schema}.jobs
SET state = 'waiting_external',
    heartbeat_at = now()
WHERE id = %(id)s AND state = 'running' AND run_lease = %(run_lease)s
  AND callback_id = %(callback_id)s::uuid
RETURNING *;

-- name: job_callback_wait_specs :many
-- The lineage spec names of the follow-ups already enqueued for the waits in place of one
-- attempt: waiting again on the same callback (after a wait timeout) adds none.
SELECT trigger_spec FROM {schema}.jobs
WHERE trigger_job_id = %(id)s AND trigger_run_lease = %(run_lease)s
  AND trigger_outcome = 'waiting_for_callback';

-- name: job_callback_unpark :exec
-- A handler stops waiting without a result (its own timeout): back to running.
UPDATE {schema}.jobs
SET state = 'running',
    heartbeat_at = now()
WHERE id = %(id)s AND state = 'waiting_external' AND run_lease = %(run_lease)s
  AND heartbeat_at IS NOT NULL;

-- name: job_callback_take :one
-- The row as a waiting handler sees it; takes (and clears) a payload resume_external left.
WITH cur AS (
    -- FOR UPDATE waits for a resolution in flight, then reads the row version it committed,
    -- the one `taken` acts on (a plain read would see this statement's older snapshot).
    SELECT id, state, run_lease, callback_id, callback_result
    FROM {schema}.jobs WHERE id = %(id)s
    FOR UPDATE
),
taken AS (
    UPDATE {schema}.jobs AS j
    SET callback_result = NULL
    FROM cur
    WHERE j.id = cur.id AND cur.state = 'running' AND cur.run_lease = %(run_lease)s
      AND cur.callback_id IS NULL AND cur.callback_result IS NOT NULL
    RETURNING j.id
)
SELECT cur.state::text AS state, cur.run_lease, cur.callback_id, cur.callback_result,
       EXISTS (SELECT 1 FROM taken) AS taken
FROM cur;

-- name: job_callback_lock :one
-- Lock the job of an unresolved callback (for resolve_callback's CEL evaluation).
SELECT * FROM {schema}.jobs
WHERE callback_id = %(callback_id)s::uuid AND state IN ('waiting_external', 'running')
-- Locked: the row the expressions see is the row the resolution then changes.
FOR UPDATE;

-- name: job_callback_complete :one
-- complete_external: waiting_external, or running (the resolution beat the park) →
-- completed; the payload stays on the row as callback_result.
WITH done AS (
    UPDATE {schema}.jobs AS j
    SET state = 'completed',
        finalized_at = now(),
        heartbeat_at = NULL,
        deadline_at = NULL,
        progress = NULL,
        callback_id = NULL,
        callback_timeout_at = NULL,
        callback_filter = NULL,
        callback_on_complete = NULL,
        callback_on_fail = NULL,
        callback_transform = NULL,
        callback_result = %(payload)s::jsonb
    WHERE j.callback_id = %(callback_id)s::uuid AND j.state IN ('waiting_external', 'running')
    RETURNING j.*
),
notified AS (
    SELECT pg_notify(%(callback_channel)s,
                     json_build_object('job_id', d.id, 'run_lease', d.run_lease)::text)
    FROM done AS d
)
-- Always true: counting a SELECT CTE runs it whole; one never read would send no NOTIFY.
SELECT done.* FROM done WHERE (SELECT count(*) FROM notified) >= 0;

-- name: job_callback_fail :one
-- fail_external: waiting_external or running → failed, terminal whatever attempts remain.
WITH done AS (
    UPDATE {schema}.jobs AS j
    SET state = 'failed',
        finalized_at = now(),
        heartbeat_at = NULL,
        deadline_at = NULL,
        callback_id = NULL,
        callback_timeout_at = NULL,
        callback_filter = NULL,
        callback_on_complete = NULL,
        callback_on_fail = NULL,
        callback_transform = NULL,
        callback_result = NULL,
        errors = j.errors || jsonb_build_array(
            jsonb_build_object('error', %(error)s::text, 'attempt', j.attempt, 'at', now(),
                               'terminal', true)
            || CASE WHEN %(expression)s::text IS NULL THEN '{}'::jsonb
                    ELSE jsonb_build_object('expression', %(expression)s::text) END)
    WHERE j.callback_id = %(callback_id)s::uuid AND j.state IN ('waiting_external', 'running')
    RETURNING j.*
),
notified AS (
    SELECT pg_notify(%(callback_channel)s,
                     json_build_object('job_id', d.id, 'run_lease', d.run_lease)::text)
    FROM done AS d
)
-- Always true: counting a SELECT CTE runs it whole; one never read would send no NOTIFY.
SELECT done.* FROM done WHERE (SELECT count(*) FROM notified) >= 0;

-- name: job_callback_retry :one
-- retry_external: waiting_external → available now, for another attempt. The attempt
-- count is kept (the next claim adds one), so an outside sender cannot loop a job
-- forever: on a job whose parked attempt was its last (attempt >= max_attempts) the
-- retry exhausts it instead → failed, the error entry saying no attempt is left.
WITH done AS (
    UPDATE {schema}.jobs AS j
    SET state = CASE WHEN j.attempt >= j.max_attempts THEN 'failed'
                     ELSE 'available' END::{schema}.job_state,
        run_at = now(),
        finalized_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
        heartbeat_at = NULL,
        deadline_at = NULL,
        callback_id = NULL,
        callback_timeout_at = NULL,
        callback_filter = NULL,
        callback_on_complete = NULL,
        callback_on_fail = NULL,
        callback_transform = NULL,
        callback_result = NULL,
        errors = j.errors || jsonb_build_array(jsonb_build_object(
            'error', CASE WHEN j.attempt >= j.max_attempts
                          THEN %(error)s::text || ', but no attempt is left (attempt '
                               || j.attempt || ' of ' || j.max_attempts || ')'
                          ELSE %(error)s::text END,
            'attempt', j.attempt, 'at', now()))
    WHERE j.callback_id = %(callback_id)s::uuid AND j.state = 'waiting_external'
    RETURNING j.*
),
woken AS (
    SELECT pg_notify(%(channel)s, d.queue) FROM done AS d WHERE d.state = 'available'
),
notified AS (
    SELECT pg_notify(%(callback_channel)s,
                     json_build_object('job_id', d.id, 'run_lease', d.run_lease)::text)
    FROM done AS d
)
SELECT done.* FROM done
-- Always true: counting a SELECT CTE runs it whole; one never read would send no NOTIFY.
WHERE (SELECT count(*) FROM woken) >= 0 AND (SELECT count(*) FROM notified) >= 0;

-- name: job_callback_resume :one
-- resume_external: a handler waiting in place (waiting_external with a heartbeat), or one
-- that registered and has not started waiting yet (running) → running, the payload left
-- for it; heartbeat refreshed, callback fields cleared. A job parked by returning
-- WaitForCallback (no heartbeat: no handler left to take a payload) is not matched.
WITH done AS (
    UPDATE {schema}.jobs AS j
    SET state = 'running',
        heartbeat_at = now(),
        callback_id = NULL,
        callback_timeout_at = NULL,
        callback_filter = NULL,
        callback_on_complete = NULL,
        callback_on_fail = NULL,
        callback_transform = NULL,
        callback_result = %(payload)s::jsonb
    WHERE j.callback_id = %(callback_id)s::uuid
      AND (j.state = 'running' OR (j.state = 'waiting_external' AND j.heartbeat_at IS NOT NULL))
    RETURNING j.*
),
notified AS (
    SELECT pg_notify(%(callback_channel)s,
                     json_build_object('job_id', d.id, 'run_lease', d.run_lease)::text)
    FROM done AS d
)
-- Always true: counting a SELECT CTE runs it whole; one never read would send no NOTIFY.
SELECT done.* FROM done WHERE (SELECT count(*) FROM notified) >= 0;

-- name: job_callback_parked :one
-- The id of the job parked (by returning WaitForCallback) on an unresolved callback, if
-- any: why a resume_external of that callback matched nothing.
SELECT id FROM {schema}.jobs
WHERE callback_id = %(callback_id)s::uuid AND state = 'waiting_external'
  AND heartbeat_at IS NULL;

-- name: job_callback_heartbeat :one
-- heartbeat_callback: push the callback timeout out to now + timeout.
UPDATE {schema}.jobs
SET callback_timeout_at = now() + make_interval(secs => %(timeout)s::float8)
WHERE callback_id = %(callback_id)s::uuid AND state IN ('waiting_external', 'running')
RETURNING *;

-- name: callback_request_remember :one
-- The HTTP ingress is about to apply a signed request: remember its digest until it
-- expires, in the transaction of the resolution. `fresh` is false when the same
-- request was already applied (or is being applied by a transaction that then commits):
-- a replay. Deletes a few expired digests on the way, so the table stays small.
WITH purged AS (
    DELETE FROM {schema}.callback_requests
    WHERE digest IN (
        SELECT digest FROM {schema}.callback_requests
        WHERE expires_at < now()
        -- A bounded purge per request, and SKIP LOCKED: a request never waits on another's purge.
        ORDER BY expires_at
        LIMIT 100
        FOR UPDATE SKIP LOCKED
    )
    RETURNING 1
),
remembered AS (
    INSERT INTO {schema}.callback_requests (digest, expires_at)
    VALUES (%(digest)s::bytea, now() + make_interval(secs => %(ttl)s::float8))
    ON CONFLICT (digest) DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM remembered) AS fresh, (SELECT count(*) FROM purged) AS purged;

-- name: job_waiting_list :many
-- The jobs parked in waiting_external on a callback, soonest timeout first, after the
-- cursor (%(after_at)s, %(after_id)s): a walk of jobs_waiting_idx, which holds only
-- waiting rows, from the cursor up to the LIMIT. Registering a callback sets its timeout,
-- so every parked job has one (a row edited by hand without one is left out; the job
-- list shows it). `overdue`: the timeout passed on the server's clock, and the next
-- rescue pass of maintenance closes the attempt. Run unprepared, so the cursor's bound
-- reaches the index.
SELECT j.*, j.callback_timeout_at < now() AS overdue
FROM {schema}.jobs AS j
WHERE j.state = 'waiting_external'
  AND j.callback_timeout_at IS NOT NULL
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
  AND (%(kind)s::text IS NULL OR j.kind = %(kind)s::text)
  AND (%(after_at)s::timestamptz IS NULL
       OR (j.callback_timeout_at >= %(after_at)s::timestamptz
           AND (j.callback_timeout_at > %(after_at)s::timestamptz
                OR j.id > %(after_id)s::bigint)))
ORDER BY j.callback_timeout_at, j.id
LIMIT %(limit)s;

-- name: job_callback_timeouts :many
-- Recent callback timeouts: jobs whose last attempt maintenance closed because its
-- callback timed out, as they are now. The rescue records it in the attempt's error entry
-- (`rescued`: callback_timeout) and the job becomes retryable (a retry is due at run_at)
-- or failed, or moves to the dead-letter queue with reason callback_timeout. No index
-- finds such entries, so each source is read newest first up to %(scan)s rows: the
-- newest retryable and the newest failed jobs (jobs_state_idx), and the newest
-- dead-letter entries (dlq_at_idx). A job that ran again since is no longer one of them
-- (its errors keep the entry). `timed_out_at` is the error entry's time (text, parsed by
-- the caller: a hand-edited entry must not fail the statement), or when the job was
-- dead-lettered (in the rescue's transaction).
WITH candidates AS (
    -- (state, id) descending: jobs_state_idx read backward, with the state fixed
    (SELECT j.* FROM {schema}.jobs AS j WHERE j.state = 'retryable'
     ORDER BY j.state DESC, j.id DESC LIMIT %(scan)s)
    UNION ALL
    (SELECT j.* FROM {schema}.jobs AS j WHERE j.state = 'failed'
     ORDER BY j.state DESC, j.id DESC LIMIT %(scan)s)
),
dead AS (
    SELECT d.job, d.reason, d.dlq_at FROM {schema}.dlq AS d
    ORDER BY d.dlq_at DESC, d.job_id DESC
    LIMIT %(scan)s
)
SELECT c.*, c.errors -> -1 ->> 'at' AS timed_out_at, NULL::timestamptz AS dlq_at
FROM candidates AS c
WHERE c.errors -> -1 ->> 'rescued' = 'callback_timeout'
  AND (%(queue)s::text IS NULL OR c.queue = %(queue)s::text)
  AND (%(kind)s::text IS NULL OR c.kind = %(kind)s::text)
UNION ALL
SELECT j.*, NULL AS timed_out_at, d.dlq_at
FROM dead AS d, LATERAL jsonb_populate_record(NULL::{schema}.jobs, d.job) AS j
WHERE d.reason = 'callback_timeout'
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
  AND (%(kind)s::text IS NULL OR j.kind = %(kind)s::text);
