-- The schema of `wai demo`. Every run drops and recreates it, so each run starts clean:
-- the jobs of a run interrupted with Ctrl-C never run, or count, in the next one.
-- A comment marks the schemas the demo made: it drops no other schema (except its
-- default, wai_demo, which belongs to the demo by name).

-- name: demo_lock :one
-- One demo per schema at a time: a session advisory lock, released when the session ends.
SELECT pg_try_advisory_lock(%(key)s::bigint)

-- name: demo_schema_comment :many
-- The comment on the schema: no row when the schema does not exist.
SELECT coalesce(obj_description(oid, 'pg_namespace'), '')
FROM pg_namespace
WHERE nspname = %(schema)s

-- name: demo_schema_drop :exec
DROP SCHEMA IF EXISTS {schema} CASCADE

-- name: demo_schema_create :exec
CREATE SCHEMA {schema}

-- name: demo_schema_mark :exec
COMMENT ON SCHEMA {schema} IS 'wai demo: dropped and recreated by every run of wai demo'
