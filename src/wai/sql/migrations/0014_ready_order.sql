-- Claims that do not wade through dead index entries.
--
-- A claim walked jobs_claim_idx from the front of its queue. Every job it had ever taken
-- left an entry there, dead but kept until vacuum removes it; while some transaction
-- holds an old snapshot (a long report, a forgotten BEGIN), vacuum removes nothing and no
-- scan may mark those entries dead, so each claim visited every job taken since, and the
-- drain fell with the number of jobs done.
--
-- Now each job that becomes available takes the next number of a sequence, ready_seq,
-- and a queue's claims walk jobs_ready_idx one priority (lane) at a time from a floor:
-- a number below which no available job of that lane is, nor ever will be. Each worker
-- process keeps its floors (wai.worker._floors); job_ready_fronts moves them.
--
-- A floor may pass a number only once no transaction can still commit a row that holds
-- it. That is why a job takes its transaction's id before its number: a transaction that
-- holds a number below one read from the sequence was running, with its id, when the
-- sequence was read, and a later snapshot shows when it has ended. The sequence has no
-- cache: a value cached by one session could be handed out after a higher one was read.

CREATE SEQUENCE {schema}.jobs_ready_seq AS bigint CACHE 1;

ALTER TABLE {schema}.jobs ADD COLUMN ready_seq bigint;

-- The jobs available now keep their order: priority, then run_at, then id.
UPDATE {schema}.jobs AS j
SET ready_seq = o.n
FROM (
    SELECT id, row_number() OVER (ORDER BY priority, run_at, id) AS n
    FROM {schema}.jobs
    WHERE state = 'available'
) AS o
WHERE j.id = o.id;

SELECT setval('{schema}.jobs_ready_seq',
              greatest(1, (SELECT count(*) FROM {schema}.jobs WHERE state = 'available')),
              (SELECT count(*) FROM {schema}.jobs WHERE state = 'available') > 0);

-- An insert takes its number through this default: the CASE takes the transaction's id
-- first (pg_current_xact_id assigns one if it has none), then the number.
ALTER TABLE {schema}.jobs ALTER COLUMN ready_seq SET DEFAULT
    CASE WHEN pg_current_xact_id() IS NOT NULL
         THEN nextval('{schema}.jobs_ready_seq') END;

-- A job that becomes available, or moves to another lane while available (priority
-- aging, a queue or priority changed by hand), takes a new number: the end of its lane.
CREATE FUNCTION {schema}.jobs_ready_seq_next() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_current_xact_id();
    NEW.ready_seq := nextval(quote_ident(TG_TABLE_SCHEMA) || '.jobs_ready_seq');
    RETURN NEW;
END
$$;

CREATE TRIGGER jobs_ready_seq
    BEFORE UPDATE ON {schema}.jobs
    FOR EACH ROW
    WHEN (NEW.state = 'available'
          AND (OLD.state <> 'available' OR OLD.priority <> NEW.priority
               OR OLD.queue <> NEW.queue OR NEW.ready_seq IS NULL))
    EXECUTE FUNCTION {schema}.jobs_ready_seq_next();

-- ready_seq is wai's own column. An available job without a number could never be
-- claimed: refused. (No BEFORE INSERT trigger: one would stop COPY from inserting in
-- batches.) A number written by hand could lie below a floor, and its job would wait for
-- the next worker process to start.
ALTER TABLE {schema}.jobs ADD CONSTRAINT jobs_ready_seq_check
    CHECK (state <> 'available' OR ready_seq IS NOT NULL);

CREATE INDEX jobs_ready_idx ON {schema}.jobs (queue, priority, ready_seq)
    WHERE state = 'available';

DROP INDEX {schema}.jobs_claim_idx;
