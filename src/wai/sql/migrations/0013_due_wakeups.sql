-- Wakeups for the loops that act on time: promotion of scheduled and retryable jobs and
-- the cron pass. Each pass learns when it is next due (the earliest run_at, the next
-- fire) and, while its process's LISTEN connection is up, sleeps until then or until
-- its idle cap, instead of polling every half second. What could make it due sooner
-- sends a note on the schema's `<schema>.due` channel (wai._db.due_channel), whoever
-- wrote it: a client, a bridge, a worker's outcome, the rescuer, the DLQ or plain SQL.

CREATE FUNCTION {schema}.due_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Empty payload: PostgreSQL folds identical notes, one per transaction whatever the
    -- number of rows. The pass that wakes reads the table; the note carries nothing.
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.due', '');
    RETURN NULL;
END
$$;

-- A job that becomes scheduled or retryable (an insert with a run_at ahead, a retry, a
-- snooze, a rescue, a retry from the DLQ). Jobs that become available or running, the
-- drain's hot path, pay the WHEN test alone.
CREATE TRIGGER jobs_due_insert
    AFTER INSERT ON {schema}.jobs
    FOR EACH ROW
    WHEN (NEW.state IN ('scheduled', 'retryable'))
    EXECUTE FUNCTION {schema}.due_changed();

CREATE TRIGGER jobs_due_update
    AFTER UPDATE OF state, run_at ON {schema}.jobs
    FOR EACH ROW
    WHEN (NEW.state IN ('scheduled', 'retryable')
          AND (OLD.state IS DISTINCT FROM NEW.state OR OLD.run_at IS DISTINCT FROM NEW.run_at))
    EXECUTE FUNCTION {schema}.due_changed();

-- A schedule added, changed or resumed: the cron pass computes its next fire again.
-- Firing moves only the cursor, which needs no wakeup (the firing pass knows it).
CREATE TRIGGER cron_schedules_due
    AFTER INSERT OR UPDATE OF expr, timezone, missed_fire_policy, paused_at
    ON {schema}.cron_schedules
    FOR EACH STATEMENT
    EXECUTE FUNCTION {schema}.due_changed();
