-- How deep every queue was, over time: the maintenance leader samples the live counts of
-- each queue (the jobs not finished, by state) and the lag of its oldest available job
-- every few seconds, and keeps a day of samples. The dashboard charts the last hour from
-- here, without counting anything when it looks.
CREATE TABLE {schema}.queue_depth (
    at                    timestamptz NOT NULL,
    queue                 text NOT NULL CHECK (length(queue) BETWEEN 1 AND 200),
    counts                jsonb NOT NULL CHECK (jsonb_typeof(counts) = 'object'),
    oldest_available_lag  float8 NOT NULL DEFAULT 0 CHECK (oldest_available_lag >= 0),
    PRIMARY KEY (at, queue)
);
