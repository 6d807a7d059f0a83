-- The audit trail (issue 44; vera.db.audit): security-relevant events with actor, action,
-- target ids and time, nothing else, in a hash chain. Each record's hash covers the one
-- before (prev_hash), so an altered or removed record breaks the chain at that record, and
-- the exported head (count and hash, vera_audit_records and a log line) shows truncation.
-- The same tables and functions live in identity, knowledge and snapshot, each a chain of
-- its own.
CREATE TABLE audit_log (
    seq        bigint PRIMARY KEY,
    at         timestamptz NOT NULL,
    actor      text NOT NULL,
    action     text NOT NULL,
    targets    jsonb NOT NULL DEFAULT '{}',
    prev_hash  bytea NOT NULL,
    hash       bytea NOT NULL
);

-- The one definition of a record's hash; `vera audit verify` recomputes it with this.
CREATE FUNCTION audit_record_hash(prev bytea, seq bigint, at timestamptz, actor text,
                                  action text, targets jsonb) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $$
    SELECT sha256(prev || convert_to(concat_ws(E'\x1f', seq::text,
        ((extract(epoch FROM at) * 1000000)::bigint)::text, actor, action, targets::text),
        'UTF8'))
$$;

-- Appends one record in the caller's transaction; records are serialized per chain.
CREATE FUNCTION audit_append(p_actor text, p_action text, p_targets jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    last_seq  bigint;
    last_hash bytea;
    stamp     timestamptz := date_trunc('microseconds', clock_timestamp());
BEGIN
    PERFORM pg_advisory_xact_lock('audit_log'::regclass::oid::bigint);
    SELECT seq, hash INTO last_seq, last_hash FROM audit_log ORDER BY seq DESC LIMIT 1;
    last_seq := coalesce(last_seq, 0) + 1;
    last_hash := coalesce(last_hash, ''::bytea);
    INSERT INTO audit_log (seq, at, actor, action, targets, prev_hash, hash)
    VALUES (last_seq, stamp, p_actor, p_action, p_targets, last_hash,
            audit_record_hash(last_hash, last_seq, stamp, p_actor, p_action, p_targets));
    RETURN last_seq;
END
$$;

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END
$$;
CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- Knowledge's administrative actions (source retraction, erasure) keep their own table
-- for the console; each one is chained here as well, its ids only (never reason or details).
CREATE FUNCTION audit_events_chained() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM audit_append(NEW.actor_id::text, NEW.action, jsonb_build_object(
        'event_id', NEW.event_id::text, 'scope_id', NEW.scope_id::text, 'target', NEW.target));
    RETURN NEW;
END
$$;
CREATE TRIGGER audit_events_chained AFTER INSERT ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_chained();
