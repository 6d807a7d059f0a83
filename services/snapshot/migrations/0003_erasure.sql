-- Erasure: snapshots stay immutable (no UPDATE, no DELETE) except inside an administrator's
-- erasure transaction, which sets the transaction-local flag vera.erasure = 'on'.
CREATE OR REPLACE FUNCTION snapshot_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('vera.erasure', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'snapshots are immutable';
END;
$$;
