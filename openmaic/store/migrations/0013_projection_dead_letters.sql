-- Events a projection could not apply. A batch that fails for a reason other than a transient database error is
-- bisected down to the event that fails alone; that event is recorded here, in the same transaction that moves
-- the checkpoint past it, and the projection goes on (see openmaic/projections/projector.py). The log is never
-- edited: once the projection (or the data it refused) is fixed, `openmaic projections rebuild` applies it again.
--
-- One row per projection and event; a rebuild that fails on it again updates the row.
CREATE TABLE projection_dead_letters (
    projection  text NOT NULL,
    stream_id   text NOT NULL,
    seq         bigint NOT NULL,
    epoch       bigint NOT NULL,
    tx          xid8 NOT NULL,
    position    bigint NOT NULL,
    type        text NOT NULL,
    error       text NOT NULL,
    sqlstate    text,
    failures    integer NOT NULL DEFAULT 1,
    first_at    timestamptz NOT NULL DEFAULT now(),
    last_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (projection, stream_id, seq)
);
