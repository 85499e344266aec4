-- The (kind, outcome) pairs any worker or maintenance process ever held a follow-up spec
-- for, recorded when its runtime starts. Outbox retention deletes only the rows of pairs
-- no process ever registered a spec for: a row some deployment could dispatch, now or
-- after a restart, is never deleted by a timer (an operator discards it explicitly).

CREATE TABLE {schema}.followup_specs (
    kind           text NOT NULL,
    outcome        text NOT NULL,
    first_seen_at  timestamptz NOT NULL DEFAULT now(),
    last_seen_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, outcome)
);
