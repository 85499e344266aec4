-- Periodic schedules: upsert on start, firing by the maintenance leader, operator actions.
--
-- A fired job is an ordinary available job whose metadata carries
-- {"wai.cron": {"name": ..., "fire_time": ...}}; its run_at is its fire time, so a
-- catch-up backlog runs in fire-time order.

-- name: cron_upsert :exec
-- Create or update schedules by name. The cursor and a pause are left alone, and a
-- schedule that this process does not register is not touched.
INSERT INTO {schema}.cron_schedules AS c (
    name, expr, timezone, kind, queue, args, priority, max_attempts, tags, metadata,
    missed_fire_policy
)
SELECT s.name, s.expr, s.timezone, s.kind, s.queue, s.args::jsonb, s.priority,
       s.max_attempts,
       coalesce((SELECT array_agg(t) FROM jsonb_array_elements_text(s.tags::jsonb) AS t), '{}'),
       s.metadata::jsonb, s.policy
FROM unnest(
    %(name)s::text[], %(expr)s::text[], %(timezone)s::text[], %(kind)s::text[],
    %(queue)s::text[], %(args)s::text[], %(priority)s::smallint[], %(max_attempts)s::int[],
    %(tags)s::text[], %(metadata)s::text[], %(policy)s::text[]
) AS s(name, expr, timezone, kind, queue, args, priority, max_attempts, tags, metadata, policy)
ON CONFLICT (name) DO UPDATE
SET expr = excluded.expr,
    timezone = excluded.timezone,
    kind = excluded.kind,
    queue = excluded.queue,
    args = excluded.args,
    priority = excluded.priority,
    max_attempts = excluded.max_attempts,
    tags = excluded.tags,
    metadata = excluded.metadata,
    missed_fire_policy = excluded.missed_fire_policy,
    updated_at = now()
WHERE (c.expr, c.timezone, c.kind, c.queue, c.args, c.priority, c.max_attempts, c.tags,
       c.metadata, c.missed_fire_policy)
      IS DISTINCT FROM
      (excluded.expr, excluded.timezone, excluded.kind, excluded.queue, excluded.args,
       excluded.priority, excluded.max_attempts, excluded.tags, excluded.metadata,
       excluded.missed_fire_policy);

-- name: cron_active :many
-- The schedules that may fire (not paused), with the database clock.
SELECT now() AS now, name, expr, timezone, missed_fire_policy, cursor_at
FROM {schema}.cron_schedules
WHERE paused_at IS NULL
ORDER BY name;

-- name: cron_fire :many
-- Enqueue the fires %(fire_at)s of one schedule, in order, if and only if its cursor
-- still is %(expected)s and it is not paused: the compare-and-set that makes a fire
-- happen once however many processes (or leaders across a failover) try it.
WITH moved AS (
    UPDATE {schema}.cron_schedules AS c
    SET cursor_at = %(cursor)s::timestamptz,
        last_fire_at = %(cursor)s::timestamptz,
        updated_at = now()
    WHERE c.name = %(name)s AND c.cursor_at = %(expected)s::timestamptz AND c.paused_at IS NULL
    RETURNING c.*
),
ins AS (
    INSERT INTO {schema}.jobs (
        kind, queue, args, state, priority, max_attempts, run_at, tags, metadata
    )
    SELECT m.kind, m.queue, m.args, 'available', m.priority, m.max_attempts, f.at, m.tags,
           m.metadata || jsonb_build_object(
               'wai.cron', jsonb_build_object('name', m.name, 'fire_time', f.label))
    FROM moved AS m,
         unnest(%(fire_at)s::timestamptz[], %(fire_label)s::text[])
             WITH ORDINALITY AS f(at, label, n)
    ORDER BY f.n
    RETURNING id, kind, queue, attempt, max_attempts
),
notified AS (
    SELECT pg_notify(%(channel)s, q.queue) FROM (SELECT DISTINCT queue FROM ins) AS q
)
-- Always true: counting a SELECT CTE runs it whole; one never read would send no NOTIFY.
SELECT id, kind, queue, attempt, max_attempts FROM ins
WHERE (SELECT count(*) FROM notified) >= 0 ORDER BY id;

-- name: cron_list :many
SELECT now() AS now, * FROM {schema}.cron_schedules ORDER BY name;

-- name: cron_get :one
SELECT now() AS now, * FROM {schema}.cron_schedules WHERE name = %(name)s;

-- name: cron_pause :one
UPDATE {schema}.cron_schedules
SET paused_at = coalesce(paused_at, now()), updated_at = now()
WHERE name = %(name)s
RETURNING now() AS now, *;

-- name: cron_resume :one
-- Resume a schedule; its cursor did not move while paused, so the fires it missed are
-- owed by its missed-fire policy (coalesce: the latest one; catch_up: every one).
UPDATE {schema}.cron_schedules
SET paused_at = NULL, updated_at = now()
WHERE name = %(name)s
RETURNING now() AS now, *;

-- name: cron_delete :one
DELETE FROM {schema}.cron_schedules WHERE name = %(name)s RETURNING name;

-- name: cron_trigger :one
-- Enqueue one job of a schedule now, paused or not, without moving its cursor.
WITH s AS (
    SELECT * FROM {schema}.cron_schedules WHERE name = %(name)s
),
ins AS (
    INSERT INTO {schema}.jobs (
        kind, queue, args, state, priority, max_attempts, run_at, tags, metadata
    )
    SELECT s.kind, s.queue, s.args, 'available', s.priority, s.max_attempts, now(), s.tags,
           s.metadata || jsonb_build_object('wai.cron', jsonb_build_object(
               'name', s.name,
               'fire_time', to_char(now() AT TIME ZONE 'UTC',
                                    'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
               'manual', true))
    FROM s
    RETURNING *
),
notified AS (
    SELECT pg_notify(%(channel)s, ins.queue) FROM ins
)
-- Always true: counting a SELECT CTE runs it whole; one never read would send no NOTIFY.
SELECT ins.* FROM ins WHERE (SELECT count(*) FROM notified) >= 0;
