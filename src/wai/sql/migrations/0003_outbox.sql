-- The follow-up outbox: transitions made where user closures must not (or cannot) run
-- — maintenance rescue, and processes without the registry — leave a row here in their
-- own transaction; a sweeper in a process holding the specs dispatches it later.

CREATE TABLE {schema}.outbox (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id           bigint NOT NULL,
    run_lease        bigint NOT NULL,
    kind             text NOT NULL,
    outcome          text NOT NULL,
    detail           jsonb NOT NULL DEFAULT '{}',
    job              jsonb NOT NULL,
    attempts         integer NOT NULL DEFAULT 0,
    last_error       text,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (job_id, run_lease, outcome)
);

CREATE INDEX outbox_due_idx ON {schema}.outbox (kind, outcome, next_attempt_at);
