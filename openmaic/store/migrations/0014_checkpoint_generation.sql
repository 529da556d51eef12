-- A checkpoint has a generation: a rebuild's swap replaces the live checkpoint with its own, whose generation is
-- new, so a live batch read before the swap (from the old tables) is refused even when the two cursors are equal.

CREATE SEQUENCE projection_checkpoint_generations;

ALTER TABLE projection_checkpoints
    ADD COLUMN generation bigint NOT NULL DEFAULT nextval('projection_checkpoint_generations');
COMMENT ON COLUMN projection_checkpoints.generation IS
    'Which copy of the read model this checkpoint describes: new for every checkpoint row (a rebuild''s included).';

DROP FUNCTION openmaic_projection_advance(text, integer, xid8, bigint, integer, xid8, bigint, bigint, bigint);
-- As in 0009, fenced on the generation the batch was read under as well as on its cursor.
CREATE FUNCTION openmaic_projection_advance(
    p_name          text,
    p_generation    bigint,
    p_from_epoch    integer,
    p_from_tx       xid8,
    p_from_position bigint,
    p_to_epoch      integer,
    p_to_tx         xid8,
    p_to_position   bigint,
    p_events        bigint,
    p_pause_key     bigint
) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_pause_key IS NOT NULL AND NOT pg_try_advisory_xact_lock_shared(p_pause_key) THEN
        RAISE EXCEPTION 'projection % is paused by a rebuild', p_name USING ERRCODE = 'OM020';
    END IF;
    UPDATE projection_checkpoints
       SET epoch = p_to_epoch, tx = p_to_tx, position = p_to_position, events_applied = events_applied + p_events,
           updated_at = now()
     WHERE name = p_name AND generation = p_generation
       AND epoch = p_from_epoch AND tx = p_from_tx AND position = p_from_position;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'the checkpoint of projection % moved', p_name USING ERRCODE = 'OM021';
    END IF;
END;
$$;
