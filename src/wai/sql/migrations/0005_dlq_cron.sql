-- The dead-letter queue (a table of its own, not a job state) and periodic schedules.

-- Per-queue dead-letter policy, written by the workers that serve the queue
-- (QueueConfig(dlq=...) or start(dlq=...)), read in SQL wherever a job fails. NULL: never
-- set, which is off.
ALTER TABLE {schema}.queues
    ADD COLUMN dlq           boolean,
    ADD COLUMN dlq_retention interval;

-- A dead-lettered job leaves the jobs table: the claim, rescue and cleanup paths never
-- see it, and its unique key is free. `job` is the jobs row as it was when it moved (its
-- id, run lease, errors, metadata and lineage are restored when it is retried); the
-- other columns are copies for filtering.
CREATE TABLE {schema}.dlq (
    job_id  bigint PRIMARY KEY,
    kind    text NOT NULL,
    queue   text NOT NULL,
    tags    text[] NOT NULL DEFAULT '{}',
    reason  text NOT NULL CHECK (length(reason) BETWEEN 1 AND 200),
    dlq_at  timestamptz NOT NULL DEFAULT now(),
    job     jsonb NOT NULL CHECK (jsonb_typeof(job) = 'object')
);

-- Listing newest first (cursor paging on (dlq_at, job_id)) and retention, oldest first.
CREATE INDEX dlq_at_idx ON {schema}.dlq (dlq_at, job_id);
CREATE INDEX dlq_queue_idx ON {schema}.dlq (queue, dlq_at, job_id);
CREATE INDEX dlq_kind_idx ON {schema}.dlq (kind, dlq_at, job_id);
CREATE INDEX dlq_tags_idx ON {schema}.dlq USING gin (tags);

-- Periodic schedules, upserted by name when a process starts and never deleted by one.
-- `cursor_at` is the compare-and-set cursor: every fire time up to it has been enqueued
-- (or skipped by the coalesce policy). Firing moves it in the statement that inserts the
-- jobs, only if it still holds the value the firing process read.
CREATE TABLE {schema}.cron_schedules (
    name               text PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 200),
    expr               text NOT NULL CHECK (length(expr) BETWEEN 1 AND 200),
    timezone           text NOT NULL DEFAULT 'UTC',
    kind               text NOT NULL CHECK (length(kind) BETWEEN 1 AND 200),
    queue              text NOT NULL CHECK (length(queue) BETWEEN 1 AND 200),
    args               jsonb NOT NULL DEFAULT '{}',
    priority           smallint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 1 AND 4),
    max_attempts       integer NOT NULL DEFAULT 25 CHECK (max_attempts BETWEEN 1 AND 1000),
    tags               text[] NOT NULL DEFAULT '{}' CHECK (cardinality(tags) <= 20),
    metadata           jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
    missed_fire_policy text NOT NULL DEFAULT 'coalesce'
        CHECK (missed_fire_policy IN ('coalesce', 'catch_up')),
    cursor_at          timestamptz NOT NULL DEFAULT now(),
    last_fire_at       timestamptz,
    paused_at          timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
