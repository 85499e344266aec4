-- name: leader_attempt_elect :one
-- Take or renew the leadership lease; returns a row only when this process leads.
INSERT INTO {schema}.leader (name, leader_id, elected_at, expires_at)
VALUES (%(name)s, %(leader_id)s, now(), now() + make_interval(secs => %(ttl)s))
ON CONFLICT (name) DO UPDATE
SET leader_id = excluded.leader_id,
    elected_at = CASE WHEN leader.leader_id = excluded.leader_id THEN leader.elected_at
                      ELSE excluded.elected_at END,
    expires_at = excluded.expires_at
WHERE leader.expires_at < now() OR leader.leader_id = excluded.leader_id
RETURNING leader_id, elected_at;

-- name: leader_resign :exec
DELETE FROM {schema}.leader WHERE name = %(name)s AND leader_id = %(leader_id)s;
