-- Flow control, the same for every process: a queue's rate limit (a token bucket kept in
-- its queues row), its global concurrency, and per-key serial execution of jobs that share
-- an ordering_key.

-- A queue's limits. The bucket refills continuously at rate_limit / rate_per tokens a
-- second up to rate_burst tokens; a claim takes one token per job. rate_tokens is the
-- bucket's content at rate_at (refills are computed, never written by a clock).
ALTER TABLE {schema}.queues
    ADD COLUMN rate_limit          integer CHECK (rate_limit BETWEEN 1 AND 1000000),
    ADD COLUMN rate_per            float8 CHECK (rate_per > 0 AND rate_per <= 86400),
    ADD COLUMN rate_burst          integer CHECK (rate_burst BETWEEN 1 AND 1000000),
    ADD COLUMN rate_tokens         float8,
    ADD COLUMN rate_at             timestamptz,
    ADD COLUMN global_concurrency  integer CHECK (global_concurrency BETWEEN 1 AND 1000000),
    -- Whether a job waiting for its retry keeps the later jobs of its ordering key waiting.
    ADD COLUMN retry_holds_key     boolean,
    -- Whether kind_limits holds a row of the queue (kept by the statements that write
    -- them), so that a plain claim learns the queue is limited from this row alone.
    ADD COLUMN has_kind_limits     boolean NOT NULL DEFAULT false,
    ADD CHECK ((rate_limit IS NULL) = (rate_per IS NULL)
               AND (rate_limit IS NULL) = (rate_burst IS NULL));

-- Rate limits of one kind within a queue, each a bucket like the queue's own. The queue's
-- claims are serialized by the queue's lock whenever it has one, so each bucket is only
-- ever spent under that lock.
CREATE TABLE {schema}.kind_limits (
    queue        text NOT NULL CHECK (length(queue) BETWEEN 1 AND 200),
    kind         text NOT NULL CHECK (length(kind) BETWEEN 1 AND 200),
    rate_limit   integer NOT NULL CHECK (rate_limit BETWEEN 1 AND 1000000),
    rate_per     float8 NOT NULL CHECK (rate_per > 0 AND rate_per <= 86400),
    rate_burst   integer NOT NULL CHECK (rate_burst BETWEEN 1 AND 1000000),
    rate_tokens  float8,
    rate_at      timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, kind)
);

-- Whose turn it is: the jobs of a key that have not finished, in insert order. A job may
-- start only when no earlier job of its key is in one of these states.
CREATE INDEX jobs_ordering_idx ON {schema}.jobs (queue, ordering_key, id)
    WHERE ordering_key IS NOT NULL
      AND state IN ('scheduled', 'available', 'running', 'retryable', 'waiting_external');

-- One row per ordering key with an attempt running: the claim inserts it (ON CONFLICT DO
-- NOTHING: a claimer that loses the race for a key leaves that job alone, it never fails
-- its batch), and the trigger below deletes it in the transaction that ends the attempt,
-- whichever transition that is (an outcome, a rescue, a cancel, a shutdown's refund), so a
-- turn is never left behind by a crashed process.
CREATE TABLE {schema}.key_turns (
    queue         text NOT NULL,
    ordering_key  text NOT NULL,
    job_id        bigint NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, ordering_key)
);

CREATE FUNCTION {schema}.ordering_key_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- The attempt goes on while the job runs or waits in place for a callback (its
    -- handler holds on, with a heartbeat); any other state ends it, and its key's turn.
    IF TG_OP = 'DELETE'
       OR NOT (NEW.state = 'running'
               OR (NEW.state = 'waiting_external' AND NEW.heartbeat_at IS NOT NULL)) THEN
        DELETE FROM {schema}.key_turns
        WHERE queue = OLD.queue AND ordering_key = OLD.ordering_key AND job_id = OLD.id;
    END IF;
    -- The key's next job may now start: wake the queue's workers on the schema's channel
    -- (wai._db.channel; one note per queue and transaction: PostgreSQL folds identical
    -- notifications).
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.jobs', OLD.queue);
    RETURN NULL;
END
$$;

-- Only a keyed job's attempt ending (or pausing for a callback), or a keyed job finishing,
-- fires it: the jobs without a key (the drain's hot path) pay the WHEN test alone.
CREATE TRIGGER jobs_ordering_key_state
    AFTER UPDATE OF state ON {schema}.jobs
    FOR EACH ROW
    WHEN (OLD.ordering_key IS NOT NULL AND OLD.state IS DISTINCT FROM NEW.state
          AND (OLD.state IN ('running', 'waiting_external')
               OR NEW.state IN ('completed', 'failed', 'cancelled')))
    EXECUTE FUNCTION {schema}.ordering_key_moved();

CREATE TRIGGER jobs_ordering_key_delete
    AFTER DELETE ON {schema}.jobs
    FOR EACH ROW
    WHEN (OLD.ordering_key IS NOT NULL
          AND OLD.state IN ('scheduled', 'available', 'running', 'retryable',
                            'waiting_external'))
    EXECUTE FUNCTION {schema}.ordering_key_moved();
