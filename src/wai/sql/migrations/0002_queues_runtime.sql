-- Queue controls (pause), runtime records of live processes, and queue settings that
-- maintenance reads (retention overrides, priority aging).

CREATE TABLE {schema}.queues (
    name                 text PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 200),
    paused               boolean NOT NULL DEFAULT false,
    paused_at            timestamptz,
    completed_retention  interval,
    failed_retention     interval,
    cancelled_retention  interval,
    priority_aging       interval,
    updated_at           timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE {schema}.runtime_instances (
    instance_id     text PRIMARY KEY,
    hostname        text NOT NULL,
    pid             integer NOT NULL,
    version         text NOT NULL,
    role            text NOT NULL,
    queues          jsonb NOT NULL DEFAULT '{}',
    concurrency     integer NOT NULL DEFAULT 0,
    in_flight       integer NOT NULL DEFAULT 0,
    leader          boolean NOT NULL DEFAULT false,
    healthy         boolean NOT NULL DEFAULT true,
    health          jsonb NOT NULL DEFAULT '{}',
    specs           jsonb NOT NULL DEFAULT '[]',
    started_at      timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz NOT NULL DEFAULT now()
);

-- Operators list jobs by state without scanning completed history. The hot path's states
-- (available, running, completed) stay out of it, so a drain writes no entry here.
CREATE INDEX jobs_state_idx ON {schema}.jobs (state, id)
    WHERE state IN ('scheduled', 'retryable', 'waiting_external', 'failed', 'cancelled');
