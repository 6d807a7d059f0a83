-- Which feedback a ranking model may learn from. The gateway says where a row's query, rank
-- and signal vector came from: one result of a persisted pack (the server's own numbers),
-- the whole pack, or nothing (the legacy alias without a pack, whose client-sent signals
-- are never stored). Only 'result' rows are training data. pack_scope_id is the project
-- the pack was assembled in (a per-project model reads only its own); seq orders rows
-- newest first for paging.
ALTER TABLE retrieval_feedback
    ADD COLUMN attribution text NOT NULL DEFAULT 'unattributed'
        CHECK (attribution IN ('result', 'pack', 'unattributed')),
    ADD COLUMN pack_scope_id uuid,
    ADD COLUMN seq bigserial;

-- Rows written before this migration: a pack-level row names its pack as its result, a
-- legacy row's pack id is synthetic; only the rest are exact results of a stored pack.
UPDATE retrieval_feedback SET attribution = CASE
    WHEN pack_id LIKE 'legacy:%' THEN 'unattributed'
    WHEN result_ref = pack_id THEN 'pack'
    ELSE 'result' END;
UPDATE retrieval_feedback SET signal_vector = '{}' WHERE attribution <> 'result';

CREATE INDEX retrieval_feedback_training ON retrieval_feedback (seq DESC)
    WHERE attribution = 'result';
