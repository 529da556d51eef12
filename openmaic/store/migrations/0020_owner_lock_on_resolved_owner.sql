-- An owner's decision lock (owner_lock: a run's admission, a start, a quota) is taken on the owner an id stands for
-- now, as the counts made under it are.
--
-- The lock was keyed by the id as given, while the counts read through openmaic_owner (0010). A run whose fold
-- still carried an anonymous id claimed into an account since took the anonymous id's lock and counted the
-- account's runs; an admission of the account's own took the account's lock and counted the same runs: not
-- serialized, both counted limit - 1 and both were admitted.
--
-- For an anonymous id the function first takes the id's identity lock shared (as the owner fence does), without
-- waiting: a claim of that id takes it exclusively, so while the decision holds it no claim can commit and the
-- owner the id stands for cannot change under it. The owner is resolved in a statement after that lock (under READ
-- COMMITTED a fresh snapshot), so a claim committed just before is seen. False means another transaction holds one
-- of the locks (the owner's decision, or a claim committing): the caller polls again.

CREATE FUNCTION openmaic_owner_try_lock(p_namespace integer, p_owner text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    resolved text;
BEGIN
    IF p_owner LIKE 'anon:%' AND NOT pg_try_advisory_xact_lock_shared(openmaic_owner_lock_key(p_owner)) THEN
        RETURN false;
    END IF;
    SELECT openmaic_owner(p_owner) INTO resolved;
    RETURN pg_try_advisory_xact_lock(p_namespace, hashtext(resolved));
END;
$$;
