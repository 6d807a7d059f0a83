-- Erasure: an administrator physically deletes a principal's personal knowledge. The
-- change log then carries one 'fact_erased' row per deleted version (version_id NULL,
-- ref = the erased version id) so derived indexes delete it too; the rows that referenced
-- the erased versions are deleted with them.
ALTER TABLE outbox DROP CONSTRAINT outbox_kind_check;
ALTER TABLE outbox ADD CONSTRAINT outbox_kind_check
    CHECK (kind IN ('fact_upserted', 'source_upserted', 'feedback_recorded', 'fact_erased'));
