-- Tailers long-poll ListChanges: a statement-level trigger wakes them when the change log
-- grows. PostgreSQL delivers the notice at commit, so a woken reader sees the new rows; the
-- channel is named after the schema, so two deployments sharing a database stay apart.
CREATE FUNCTION notify_outbox_appended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.outbox', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER outbox_appended AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION notify_outbox_appended();
