-- Outbox rows that keep failing end visibly failed instead of being retried (or deleted)
-- forever: the sweeper sets failed_at once a row has failed outbox_max_attempts times,
-- and skips it from then on; an operator retries it (failed_at back to NULL) or discards it.

ALTER TABLE {schema}.outbox ADD COLUMN failed_at timestamptz;
