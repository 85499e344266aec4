-- External callbacks: the optional CEL expressions that resolve_callback evaluates, the
-- payload a resolution hands over (to a handler waiting in place, or kept on a completed
-- row), and an index for the rescue of parked jobs (callback timeout, stale waiter).

ALTER TABLE {schema}.jobs
    ADD COLUMN callback_filter      text,
    ADD COLUMN callback_on_complete text,
    ADD COLUMN callback_on_fail     text,
    ADD COLUMN callback_transform   text,
    ADD COLUMN callback_result      jsonb;

CREATE INDEX jobs_waiting_idx ON {schema}.jobs (callback_timeout_at)
    WHERE state = 'waiting_external';
