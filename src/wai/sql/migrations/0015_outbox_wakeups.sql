-- Wakeups for the outbox sweepers. A sweeper polled the outbox every outbox_interval in
-- every process holding follow-up specs, rows or none. Now each pass learns when the next
-- row of its (kind, outcome) pairs is due and, while its process's LISTEN connection is
-- up, sleeps until then or until its idle cap; what could make a row due sooner sends a
-- note on the schema's `<schema>.outbox` channel (wai._db.outbox_channel), whoever wrote
-- it: a rescue, a process without the specs, an operator's retry or plain SQL.

CREATE FUNCTION {schema}.outbox_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Empty payload: identical notes fold into one per transaction.
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.outbox', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_due_insert
    AFTER INSERT ON {schema}.outbox
    FOR EACH ROW
    EXECUTE FUNCTION {schema}.outbox_changed();

-- A row made due sooner or pending again (an operator's retry). A sweeper's own backoff
-- moves a row later, which the sweeper that wrote it knows: no note.
CREATE TRIGGER outbox_due_update
    AFTER UPDATE OF next_attempt_at, failed_at ON {schema}.outbox
    FOR EACH ROW
    WHEN (NEW.failed_at IS NULL
          AND (OLD.failed_at IS NOT NULL OR NEW.next_attempt_at < OLD.next_attempt_at))
    EXECUTE FUNCTION {schema}.outbox_changed();
