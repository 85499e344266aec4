-- name: runtime_instance_upsert :exec
-- Create or refresh the record of one live worker or maintenance process.
INSERT INTO {schema}.runtime_instances AS r (
    instance_id, hostname, pid, version, role, queues, concurrency, in_flight,
    leader, healthy, health, specs, started_at, last_seen_at
)
VALUES (
    %(instance_id)s, %(hostname)s, %(pid)s, %(version)s, %(role)s, %(queues)s::jsonb,
    %(concurrency)s, %(in_flight)s, %(leader)s, %(healthy)s, %(health)s::jsonb,
    %(specs)s::jsonb, now(), now()
)
ON CONFLICT (instance_id) DO UPDATE
SET version = excluded.version,
    role = excluded.role,
    queues = excluded.queues,
    concurrency = excluded.concurrency,
    in_flight = excluded.in_flight,
    leader = excluded.leader,
    healthy = excluded.healthy,
    health = excluded.health,
    specs = excluded.specs,
    last_seen_at = now();

-- name: runtime_instance_delete :exec
-- Remove the record of a process that shuts down gracefully.
DELETE FROM {schema}.runtime_instances WHERE instance_id = %(instance_id)s;

-- name: runtime_instance_delete_stale :many
-- Remove the records of processes not seen for 3 x their own record interval (read from
-- their health JSON, else %(default_interval)s), and never sooner than %(min_age)s seconds.
DELETE FROM {schema}.runtime_instances
WHERE last_seen_at < now() - make_interval(secs => greatest(
    %(min_age)s::float8,
    3 * coalesce(
        -- A number only: one malformed record must not fail the cast, and the whole statement.
        CASE WHEN jsonb_typeof(health -> 'record_interval') = 'number'
             THEN (health ->> 'record_interval')::float8 END,
        %(default_interval)s::float8)))
RETURNING instance_id;

-- name: runtime_instance_list :many
-- Every recorded process, oldest first.
SELECT * FROM {schema}.runtime_instances ORDER BY started_at, instance_id;

-- name: queue_settings_upsert :exec
-- Record per-queue settings given in code (QueueConfig); a NULL leaves the stored value.
-- A new rate limit starts with a full bucket (its burst); workers re-read the limits of a
-- queue whose flow control was given (a note on the flow channel per such queue).
WITH stored AS (
    INSERT INTO {schema}.queues AS q (
        name, completed_retention, priority_aging, dlq, dlq_retention,
        rate_limit, rate_per, rate_burst, global_concurrency, retry_holds_key)
    SELECT s.name, make_interval(secs => s.retention), make_interval(secs => s.aging), s.dlq,
           make_interval(secs => s.dlq_retention),
           s.rate_limit, s.rate_per, s.rate_burst, s.global_concurrency, s.retry_holds_key
    FROM unnest(%(name)s::text[], %(retention)s::float8[], %(aging)s::float8[], %(dlq)s::bool[],
                %(dlq_retention)s::float8[], %(rate_limit)s::int[], %(rate_per)s::float8[],
                %(rate_burst)s::int[], %(global_concurrency)s::int[], %(retry_holds_key)s::bool[])
        AS s(name, retention, aging, dlq, dlq_retention, rate_limit, rate_per, rate_burst,
             global_concurrency, retry_holds_key)
    ON CONFLICT (name) DO UPDATE
    SET completed_retention = coalesce(excluded.completed_retention, q.completed_retention),
        priority_aging = coalesce(excluded.priority_aging, q.priority_aging),
        dlq = coalesce(excluded.dlq, q.dlq),
        dlq_retention = coalesce(excluded.dlq_retention, q.dlq_retention),
        rate_limit = coalesce(excluded.rate_limit, q.rate_limit),
        rate_per = coalesce(excluded.rate_per, q.rate_per),
        rate_burst = coalesce(excluded.rate_burst, q.rate_burst),
        -- The bucket keeps what it holds (at most the burst) while the rate stays the same.
        rate_tokens = CASE WHEN excluded.rate_limit IS NULL THEN q.rate_tokens
                           WHEN (excluded.rate_limit, excluded.rate_per, excluded.rate_burst)
                                IS NOT DISTINCT FROM (q.rate_limit, q.rate_per, q.rate_burst)
                           THEN q.rate_tokens END,
        rate_at = CASE WHEN excluded.rate_limit IS NULL THEN q.rate_at
                       WHEN (excluded.rate_limit, excluded.rate_per, excluded.rate_burst)
                            IS NOT DISTINCT FROM (q.rate_limit, q.rate_per, q.rate_burst)
                       THEN q.rate_at END,
        global_concurrency = coalesce(excluded.global_concurrency, q.global_concurrency),
        retry_holds_key = coalesce(excluded.retry_holds_key, q.retry_holds_key),
        updated_at = now()
    RETURNING q.name, q.rate_limit IS NOT NULL OR q.global_concurrency IS NOT NULL AS limited
)
SELECT pg_notify(%(flow_channel)s, s.name) FROM stored AS s WHERE s.limited;

-- name: kind_limits_upsert :exec
-- Record the rate limits of kinds within queues given in code (QueueConfig.kind_rate_limits).
-- The queue's row is created if missing (its claims take its lock from now on); a limit
-- that changes starts with a full bucket. Workers re-read the queue's limits (a note on
-- the flow channel per queue).
WITH given AS (
    SELECT * FROM unnest(%(queue)s::text[], %(kind)s::text[], %(rate_limit)s::int[],
                         %(rate_per)s::float8[], %(rate_burst)s::int[])
        AS g(queue, kind, rate_limit, rate_per, rate_burst)
),
queues AS (
    -- has_kind_limits: from now on the queue is claimed under its lock (limits are only
    -- added here; kind_limit_set, which lifts them, counts them again).
    INSERT INTO {schema}.queues AS q (name, has_kind_limits)
    SELECT DISTINCT g.queue, true FROM given AS g
    ON CONFLICT (name) DO UPDATE SET has_kind_limits = true, updated_at = now()
    RETURNING q.name
),
stored AS (
    INSERT INTO {schema}.kind_limits AS k (queue, kind, rate_limit, rate_per, rate_burst)
    SELECT g.queue, g.kind, g.rate_limit, g.rate_per, g.rate_burst
    FROM given AS g
    -- after the queues rows (a reference orders the two writes)
    WHERE (SELECT count(*) FROM queues) >= 0
    ON CONFLICT (queue, kind) DO UPDATE
    SET rate_limit = excluded.rate_limit,
        rate_per = excluded.rate_per,
        rate_burst = excluded.rate_burst,
        rate_tokens = CASE WHEN (excluded.rate_limit, excluded.rate_per, excluded.rate_burst)
                                IS NOT DISTINCT FROM (k.rate_limit, k.rate_per, k.rate_burst)
                           THEN k.rate_tokens END,
        rate_at = CASE WHEN (excluded.rate_limit, excluded.rate_per, excluded.rate_burst)
                            IS NOT DISTINCT FROM (k.rate_limit, k.rate_per, k.rate_burst)
                       THEN k.rate_at END,
        updated_at = now()
    RETURNING k.queue
)
SELECT pg_notify(%(flow_channel)s, s.queue) FROM (SELECT DISTINCT queue FROM stored) AS s;

-- name: job_delete_finalized :many
-- Delete up to %(limit)s terminal jobs finalized longer ago than the retention of their
-- state: the queue's override in the queues table, else the default in seconds. The scan
-- walks jobs_finalized_idx up to the shortest retention in force, from %(after)s (NULL:
-- from the oldest), where the previous batch ended: the entries of the rows it deleted
-- stay until vacuum, and an old snapshot keeps them for as long as it is held.
-- Rows are locked (and re-checked) so a job retried meanwhile is left alone. Returns
-- counts per state and the latest finalized_at deleted.
WITH cutoff AS (
    SELECT now() - least(
        make_interval(secs => least(%(completed)s, %(failed)s, %(cancelled)s)::float8),
        min(least(q.completed_retention, q.failed_retention, q.cancelled_retention))
    ) AS oldest_kept
    FROM {schema}.queues AS q
),
doomed AS (
    SELECT j.id
    FROM {schema}.jobs AS j
    LEFT JOIN {schema}.queues AS q ON q.name = j.queue
    WHERE j.state IN ('completed', 'failed', 'cancelled')
      AND j.finalized_at >= coalesce(%(after)s::timestamptz, '-infinity')
      AND j.finalized_at < (SELECT oldest_kept FROM cutoff)
      AND j.finalized_at < now() - CASE j.state
          WHEN 'completed' THEN coalesce(q.completed_retention,
                                         make_interval(secs => %(completed)s::float8))
          WHEN 'failed' THEN coalesce(q.failed_retention,
                                      make_interval(secs => %(failed)s::float8))
          ELSE coalesce(q.cancelled_retention, make_interval(secs => %(cancelled)s::float8))
      END
    -- The oldest first, always: the next batch starts at this one's latest finalized_at,
    -- so a batch of rows in any other order (a bitmap or sequential scan's, by page) would
    -- make it skip the older rows this one left.
    ORDER BY j.finalized_at
    LIMIT %(limit)s
    FOR UPDATE OF j SKIP LOCKED
),
deleted AS (
    DELETE FROM {schema}.jobs AS j
    USING doomed
    WHERE j.id = doomed.id AND j.state IN ('completed', 'failed', 'cancelled')
    RETURNING j.state, j.finalized_at
)
SELECT state::text AS state, count(*) AS deleted, max(finalized_at) AS last
FROM deleted GROUP BY state;

-- name: outbox_delete_expired :one
-- Outbox retention: delete up to %(limit)s orphaned outbox rows created longer than
-- %(retention)s seconds ago, oldest first. An orphan holds no follow-up to dispatch: no
-- process ever registered a spec for its kind and outcome (followup_specs, recorded by
-- every runtime at start; runtime_instances too, for records written before it), and no
-- sweeper ever tried it (no attempt, no error: an operator's retry keeps the error).
-- Rescues, and admin cancels and callback resolutions by a process without the registry,
-- leave such a row for every job of a kind without specs. A row of a pair some process
-- registered, or a row that failed (pending with attempts, or failed_at set), is never
-- deleted here, however old: it holds undispatched work, for a sweeper or an operator
-- (wai outbox retry|discard). The walk follows the primary key (ids grow with
-- created_at), and rows a sweeper holds are skipped. Returns how many were deleted.
WITH held AS (
    SELECT kind, outcome FROM {schema}.followup_specs
    UNION
    SELECT s->>'kind', s->>'outcome'
    FROM {schema}.runtime_instances AS r
    CROSS JOIN LATERAL jsonb_array_elements(r.specs) AS s
),
doomed AS (
    SELECT o.id FROM {schema}.outbox AS o
    WHERE o.created_at < now() - make_interval(secs => %(retention)s::float8)
      AND o.attempts = 0 AND o.last_error IS NULL AND o.failed_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM held AS h WHERE h.kind = o.kind AND h.outcome = o.outcome)
    ORDER BY o.id
    LIMIT %(limit)s
    FOR UPDATE OF o SKIP LOCKED
),
deleted AS (
    DELETE FROM {schema}.outbox AS o
    USING doomed
    WHERE o.id = doomed.id AND o.attempts = 0 AND o.last_error IS NULL AND o.failed_at IS NULL
    RETURNING 1
)
SELECT count(*) AS deleted FROM deleted;

-- name: job_age_priority :many
-- Priority aging: an available job of a queue with priority_aging set gets priority
-- original - floor(waited / priority_aging) (at least 1), waited counted from run_at.
-- The first change remembers the original priority in metadata "wai.original_priority".
-- Returns counts per queue.
WITH aging AS (
    SELECT name, priority_aging, extract(epoch FROM priority_aging)::float8 AS secs
    FROM {schema}.queues
    WHERE priority_aging > interval '0'
),
due AS (
    -- One index walk (jobs_ready_idx, the queue's available jobs) per aging queue. A job
    -- that moves up takes a new ready_seq (migration 0014): the end of its new lane.
    SELECT c.id, c.target
    FROM aging AS a
    CROSS JOIN LATERAL (
        SELECT j.id, t.target
        FROM {schema}.jobs AS j
        CROSS JOIN LATERAL (
            SELECT greatest(1, coalesce(
                -- User metadata: a value that is not a number is ignored, not cast (and failed),
                -- and a number is clamped to 1..4 before the cast, so 1e10 cannot overflow it.
                CASE WHEN jsonb_typeof(j.metadata -> 'wai.original_priority') = 'number'
                     THEN least(4, greatest(1,
                              (j.metadata ->> 'wai.original_priority')::numeric))::int END,
                j.priority
            ) - floor(extract(epoch FROM now() - j.run_at) / a.secs)::bigint)::smallint AS target
        ) AS t
        WHERE j.queue = a.name
          AND j.state = 'available'
          AND j.priority > 1
          AND j.run_at <= now() - a.priority_aging
          AND t.target < j.priority
        LIMIT %(limit)s
        -- SKIP LOCKED: a job that a claim is taking right now is left to it, not waited for.
        FOR UPDATE OF j SKIP LOCKED
    ) AS c
    LIMIT %(limit)s
),
aged AS (
    UPDATE {schema}.jobs AS j
    SET priority = due.target,
        metadata = CASE WHEN j.metadata ? 'wai.original_priority' THEN j.metadata
                        ELSE j.metadata || jsonb_build_object('wai.original_priority', j.priority)
                   END
    FROM due
    WHERE j.id = due.id AND j.state = 'available' AND due.target < j.priority
    RETURNING j.queue
)
SELECT queue, count(*) AS aged FROM aged GROUP BY queue;

-- name: jobs_table_stats :one
-- What the planner last learned of the jobs table (reltuples, -1 if never analyzed), how
-- many rows changed since (the statistics views' count, kept by the server), and how many
-- seconds ago autovacuum last analyzed it (NULL: never, as where autovacuum is off).
SELECT c.reltuples::float8, coalesce(s.n_mod_since_analyze, 0)::bigint,
       extract(epoch FROM now() - s.last_autoanalyze)::float8
FROM pg_class AS c
LEFT JOIN pg_stat_user_tables AS s ON s.relid = c.oid
WHERE c.oid = to_regclass(%(table)s);

-- name: lock_wait_local :exec
-- Bound this transaction's waits for a lock (lock_timeout, SET LOCAL): past it, the
-- statement fails with lock_not_available.
SELECT set_config('lock_timeout', %(timeout)s, true);

-- name: jobs_table_analyze :exec
-- Refresh the jobs table's statistics; cached plans of statements on it are made again.
ANALYZE {schema}.jobs;

-- name: jobs_index_sizes :many
-- Every btree index of the jobs table on plain columns: its name, whether it is valid,
-- its size in bytes, the entries it held at the last vacuum or analyze (reltuples), and
-- the bytes one entry takes about (the key columns' average width from pg_stats, 8 where
-- unknown, plus the tuple header and line pointer). Other access methods and expression
-- indexes are left out: their size per entry is not that.
SELECT i.relname::text,
       x.indisvalid,
       pg_relation_size(i.oid)::bigint,
       greatest(i.reltuples, 0)::float8,
       16 + coalesce((
           SELECT sum(coalesce(s.avg_width, 8))
           FROM unnest(x.indkey::int2[]) AS k(attnum)
           JOIN pg_attribute AS a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
           LEFT JOIN pg_stats AS s
               ON s.schemaname = n.nspname AND s.tablename = t.relname AND s.attname = a.attname
       ), 8)::float8
FROM pg_index AS x
JOIN pg_class AS i ON i.oid = x.indexrelid
JOIN pg_class AS t ON t.oid = x.indrelid
JOIN pg_namespace AS n ON n.oid = t.relnamespace
JOIN pg_am AS am ON am.oid = i.relam
WHERE x.indrelid = to_regclass(%(table)s) AND am.amname = 'btree' AND x.indexprs IS NULL
ORDER BY i.relname;

-- name: jobs_rebuild_state :one
-- Whether the indexes of the jobs table can be rebuilt now: seconds since the oldest
-- transaction of a client of this database that holds a snapshot began (0: none visible;
-- vacuums are not waited for; another role's sessions show only with pg_read_all_stats),
-- how many vacuums of the table have ended (manual and autovacuum), and the size of its
-- heap in bytes (what a rebuild scans).
SELECT
    coalesce((
        SELECT extract(epoch FROM now() - min(a.xact_start))
        FROM pg_stat_activity AS a
        WHERE a.datid = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND a.pid <> pg_backend_pid()
          AND a.backend_type = 'client backend'
          AND a.backend_xmin IS NOT NULL
          AND a.xact_start IS NOT NULL
    ), 0)::float8,
    coalesce((
        SELECT s.vacuum_count + s.autovacuum_count
        FROM pg_stat_user_tables AS s
        WHERE s.relid = to_regclass(%(table)s)
    ), 0)::bigint,
    coalesce(pg_relation_size(to_regclass(%(table)s)), 0)::bigint;

-- name: jobs_index_rebuild :exec
-- Build an index of the jobs table again, next to the old one, and swap them: writes go on
-- meanwhile. {index} is the index's name, quoted by the caller. Not in a transaction block.
REINDEX INDEX CONCURRENTLY {schema}.{index};

-- name: jobs_index_drop :exec
-- Drop an index of the jobs table without blocking writes ({index}: quoted by the caller).
DROP INDEX CONCURRENTLY IF EXISTS {schema}.{index};

-- name: followup_specs_upsert :exec
-- Record the (kind, outcome) pairs a starting runtime holds follow-up specs for.
INSERT INTO {schema}.followup_specs AS f (kind, outcome)
SELECT * FROM unnest(%(kind)s::text[], %(outcome)s::text[])
ON CONFLICT (kind, outcome) DO UPDATE SET last_seen_at = now();

-- name: depth_record :exec
-- One depth sample: the live counts and lag of every queue, all stamped with the same time.
INSERT INTO {schema}.queue_depth (at, queue, counts, oldest_available_lag)
SELECT now(), q.queue, q.counts, q.lag
FROM unnest(%(queue)s::text[], %(counts)s::jsonb[], %(lag)s::float8[]) AS q(queue, counts, lag)
ON CONFLICT (at, queue) DO NOTHING;

-- name: depth_delete_old :one
-- Forget depth samples older than the retention; returns how many went.
WITH gone AS (
    DELETE FROM {schema}.queue_depth
    WHERE at < now() - make_interval(secs => %(retention)s::float8)
    RETURNING 1
)
SELECT count(*) FROM gone;

-- name: throughput_add :exec
-- Add a process's counts to the per-minute totals. The rows come sorted by key, so two
-- processes adding to the same minutes lock them in the same order (no deadlock).
INSERT INTO {schema}.throughput AS t (minute, queue, kind, event, n)
SELECT * FROM unnest(%(minute)s::timestamptz[], %(queue)s::text[], %(kind)s::text[],
                     %(event)s::text[], %(n)s::bigint[])
ON CONFLICT (minute, queue, kind, event) DO UPDATE SET n = t.n + EXCLUDED.n;

-- name: throughput_delete_old :one
-- Forget the counts of minutes older than the retention; returns how many rows went.
WITH gone AS (
    DELETE FROM {schema}.throughput
    WHERE minute < now() - make_interval(secs => %(retention)s::float8)
    RETURNING 1
)
SELECT count(*) FROM gone;
