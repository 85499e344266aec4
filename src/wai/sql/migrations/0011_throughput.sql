-- What workers did, per minute: how many jobs completed, were retried, failed, were
-- cancelled by their handler, snoozed, parked on a callback or rescued, by queue and kind.
-- Every worker counts its committed outcomes in memory and adds them here every few
-- seconds (not per job, off the hot path); the maintenance leader keeps a day of them.
-- The dashboard's throughput chart reads the last hour from here.
CREATE TABLE {schema}.throughput (
    minute  timestamptz NOT NULL,
    queue   text NOT NULL CHECK (length(queue) BETWEEN 1 AND 200),
    kind    text NOT NULL CHECK (length(kind) BETWEEN 1 AND 200),
    event   text NOT NULL CHECK (length(event) BETWEEN 1 AND 50),
    n       bigint NOT NULL CHECK (n >= 0),
    PRIMARY KEY (minute, queue, kind, event)
);
