-- The jobs table, its states and the indexes every hot path relies on.

CREATE TYPE {schema}.job_state AS ENUM (
    'scheduled',
    'available',
    'running',
    'retryable',
    'waiting_external',
    'completed',
    'failed',
    'cancelled'
);

CREATE TABLE {schema}.jobs (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind                text NOT NULL CHECK (length(kind) BETWEEN 1 AND 200),
    queue               text NOT NULL DEFAULT 'default' CHECK (length(queue) BETWEEN 1 AND 200),
    args                jsonb NOT NULL DEFAULT '{}',
    state               {schema}.job_state NOT NULL DEFAULT 'available',
    priority            smallint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 1 AND 4),
    attempt             integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts        integer NOT NULL DEFAULT 25 CHECK (max_attempts BETWEEN 1 AND 1000),
    run_at              timestamptz NOT NULL DEFAULT now(),
    attempted_at        timestamptz,
    heartbeat_at        timestamptz,
    deadline_at         timestamptz,
    finalized_at        timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    errors              jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(errors) = 'array'),
    metadata            jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    tags                text[] NOT NULL DEFAULT '{}' CHECK (cardinality(tags) <= 20),
    unique_key          bytea,
    unique_states       {schema}.job_state[],
    ordering_key        text,
    callback_id         uuid,
    callback_timeout_at timestamptz,
    run_lease           bigint NOT NULL DEFAULT 0,
    progress            jsonb,
    trigger_job_id      bigint,
    trigger_run_lease   bigint,
    trigger_outcome     text,
    trigger_spec        text,
    CHECK ((unique_key IS NULL) = (unique_states IS NULL)),
    CHECK ((trigger_job_id IS NULL) = (trigger_spec IS NULL))
);

-- The claim path reads only this index: live, claimable rows in claim order.
CREATE INDEX jobs_claim_idx ON {schema}.jobs (queue, priority, run_at, id)
    WHERE state = 'available';

-- Promotion of due scheduled and retryable jobs.
CREATE INDEX jobs_due_idx ON {schema}.jobs (run_at)
    WHERE state IN ('scheduled', 'retryable');

-- Rescue of running attempts whose heartbeat is stale or whose deadline passed.
CREATE INDEX jobs_running_idx ON {schema}.jobs (heartbeat_at)
    WHERE state = 'running';

-- Retention cleanup of terminal rows.
CREATE INDEX jobs_finalized_idx ON {schema}.jobs (finalized_at)
    WHERE state IN ('completed', 'failed', 'cancelled');

-- A unique job holds its key while its state is one of its unique_states.
CREATE UNIQUE INDEX jobs_unique_idx ON {schema}.jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state = ANY (unique_states);

CREATE UNIQUE INDEX jobs_callback_idx ON {schema}.jobs (callback_id)
    WHERE callback_id IS NOT NULL;

-- Lineage: one follow-up per (trigger, run lease, outcome, spec), however often it is retried.
CREATE UNIQUE INDEX jobs_trigger_idx
    ON {schema}.jobs (trigger_job_id, trigger_run_lease, trigger_outcome, trigger_spec)
    WHERE trigger_job_id IS NOT NULL;

-- Maintenance leadership: one row per database, held under a lease.
CREATE TABLE {schema}.leader (
    name        text PRIMARY KEY,
    leader_id   text NOT NULL,
    elected_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
