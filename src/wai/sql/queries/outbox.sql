-- name: outbox_lock_due :many
-- Lock due outbox rows of the (kind, outcome) pairs this process holds specs for.
SELECT o.* FROM {schema}.outbox AS o
JOIN unnest(%(kinds)s::text[], %(outcomes)s::text[]) AS s(kind, outcome)
    ON o.kind = s.kind AND o.outcome = s.outcome
WHERE o.next_attempt_at <= now()
ORDER BY o.id
LIMIT %(limit)s
FOR UPDATE OF o SKIP LOCKED;

-- name: outbox_dispatched_specs :many
-- Specs already dispatched for one trigger attempt (lineage), so a retry skips them.
SELECT trigger_spec FROM {schema}.jobs
WHERE trigger_job_id = %(job_id)s AND trigger_run_lease = %(run_lease)s
  AND trigger_outcome = %(outcome)s;

-- name: outbox_delete :exec
DELETE FROM {schema}.outbox WHERE id = %(id)s;

-- name: outbox_backoff :exec
-- Record a failed dispatch and retry later, with exponential backoff capped at one hour.
UPDATE {schema}.outbox
SET attempts = attempts + 1,
    last_error = %(error)s,
    next_attempt_at = now() + make_interval(secs => least(power(2, least(attempts + 1, 12)), 3600))
WHERE id = %(id)s;

-- name: outbox_list :many
-- Outbox rows for operators, oldest first.
SELECT * FROM {schema}.outbox ORDER BY id LIMIT %(limit)s;

-- name: outbox_insert :exec
-- Leave the outbox row of one transition made in this transaction (the row as it is now):
-- a callback resolution by a process that holds no spec for its kind and outcome.
INSERT INTO {schema}.outbox (job_id, run_lease, kind, outcome, detail, job)
SELECT j.id, j.run_lease, j.kind, %(outcome)s::text, %(detail)s::jsonb, to_jsonb(j)
FROM {schema}.jobs AS j
WHERE j.id = %(id)s
ON CONFLICT (job_id, run_lease, outcome) DO NOTHING;
