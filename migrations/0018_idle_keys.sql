-- Halcyon 0018: fair keys with nothing runnable step out of the rotation. The claim looked at a
-- queue's first keys by turn and sent those without a runnable job (scheduled later, in backoff,
-- at a lower priority) to the back: 3,000 keys scheduled a day ahead then stood between a
-- tenant and its next turn for hundreds of claims. Now such a key is parked until the time its
-- next job could be runnable (its first job's run_at, at most a minute ahead; a second when its
-- jobs wait behind a higher priority), keeping its turn; a parked key is looked at again when
-- that time comes, and at once when a job of its own is enqueued or queued again. The claim
-- reads only keys that are not parked, in turn order, and a few parked ones whose time came.
-- The common share ('') is never parked.

ALTER TABLE halcyon.fair_turns
    ADD COLUMN parked_until timestamptz,
    ADD CONSTRAINT fair_turns_parked_finite CHECK (isfinite(parked_until)),
    ADD CONSTRAINT fair_turns_common_share_not_parked CHECK (fair_key <> '' OR parked_until IS NULL);
COMMENT ON COLUMN halcyon.fair_turns.parked_until IS
    'NULL: in the rotation; else the key had nothing runnable when the claim looked and is looked at again from this time (or when a job of its own is queued)';

DROP INDEX halcyon.fair_turns_order_idx;
CREATE INDEX fair_turns_order_idx ON halcyon.fair_turns (queue, turn, fair_key) WHERE parked_until IS NULL;
CREATE INDEX fair_turns_parked_idx ON halcyon.fair_turns (queue, parked_until) WHERE parked_until IS NOT NULL;

-- Parked keys come back as soon as a job of their own is queued: after the triggers of 0015
-- have put the keys in the rotation (an INSERT's, once per statement; a row queued again or
-- moved, per row). Only parked keys are written: a key in the rotation costs a probe.
CREATE FUNCTION halcyon.unpark_fair_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM added WHERE fair_key IS NOT NULL) THEN
        UPDATE halcyon.fair_turns t SET parked_until = NULL
        WHERE t.parked_until IS NOT NULL
          AND (t.queue, t.fair_key) IN (SELECT DISTINCT a.queue, a.fair_key FROM added a WHERE a.fair_key IS NOT NULL);
    END IF;
    RETURN NULL;
END
$$;
-- Named to fire after jobs_register_fair_keys (triggers of an event fire in name order).
CREATE TRIGGER jobs_unpark_fair_keys AFTER INSERT ON halcyon.jobs
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION halcyon.unpark_fair_keys();

CREATE FUNCTION halcyon.unpark_fair_key() RETURNS trigger
LANGUAGE plpgsql SET enable_seqscan = off AS $$
BEGIN
    UPDATE halcyon.fair_turns SET parked_until = NULL WHERE queue = NEW.queue AND fair_key = NEW.fair_key AND parked_until IS NOT NULL;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_unpark_fair_key_again AFTER UPDATE OF state, queue, fair_key ON halcyon.jobs
    FOR EACH ROW WHEN (NEW.fair_key IS NOT NULL AND NEW.state = 'queued'
                       AND (OLD.state <> 'queued' OR OLD.queue <> NEW.queue OR OLD.fair_key IS DISTINCT FROM NEW.fair_key))
    EXECUTE FUNCTION halcyon.unpark_fair_key();
