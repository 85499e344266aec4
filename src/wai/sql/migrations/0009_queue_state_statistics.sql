-- Joint statistics of (queue, state), so that queue stats can estimate how many finished
-- jobs each queue holds without counting them: ANALYZE (autovacuum's, or wai's analyzer)
-- keeps the most common (queue, state) pairs with their share of the table. The planner
-- uses them too, for conditions on both columns (a queue's available jobs).
CREATE STATISTICS {schema}.jobs_queue_state (mcv) ON queue, state FROM {schema}.jobs;
