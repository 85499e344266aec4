-- Signed HTTP callback requests the ingress applied, remembered until their timestamp
-- leaves the freshness window: the same signed request (same digest) is refused while
-- it could still pass the timestamp check, so a captured request cannot be replayed —
-- not even a heartbeat, which never spends its callback id. Shared by every ingress
-- process of the database. Rows are written in the transaction of the resolution they
-- allowed (a request refused or rolled back leaves none), and expired ones are deleted
-- a few at a time by later inserts.

CREATE TABLE {schema}.callback_requests (
    digest      bytea PRIMARY KEY,
    expires_at  timestamptz NOT NULL
);

CREATE INDEX callback_requests_expires_idx ON {schema}.callback_requests (expires_at);
