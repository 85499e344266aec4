-- Autovacuum of the jobs table without its cost delay.
--
-- Every job leaves dead row versions in jobs (its claim, its outcome, its deletion by
-- retention): thousands a second on a busy queue. PostgreSQL's autovacuum sleeps 2 ms
-- after every 200 units of work by default (autovacuum_vacuum_cost_delay and _limit),
-- which suits tables that change slowly. On this one, after a transaction had held an old
-- snapshot for ten minutes (vacuum can remove nothing behind it), the throttled visit that
-- cleans the versions it kept took minutes while the table went on growing, and later
-- visits fell behind again; unthrottled, it took seconds and the size stayed flat
-- (bench/RESULTS.md, the held runs of 2026-12-06). Only this table's visits change: the
-- server's settings and every other table keep theirs. An operator may set a delay again
-- with ALTER TABLE ... SET (autovacuum_vacuum_cost_delay = ...), or RESET it; no later
-- migration undoes that.

ALTER TABLE {schema}.jobs SET (autovacuum_vacuum_cost_delay = 0);
