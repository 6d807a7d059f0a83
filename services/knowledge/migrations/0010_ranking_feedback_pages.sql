-- ListRankingFeedback reads training rows newest first, deployment-wide or of one pack
-- scope, and under a per-principal cap counts each principal's rows above the page. These
-- covering indexes answer both from the index alone (the full row is read only for the
-- page itself); the unscoped one supersedes retrieval_feedback_training.
CREATE INDEX retrieval_feedback_training_rows ON retrieval_feedback (seq DESC)
    INCLUDE (principal_id, pack_scope_id, recorded_at)
    WHERE attribution = 'result';

CREATE INDEX retrieval_feedback_training_by_scope
    ON retrieval_feedback (pack_scope_id, seq DESC)
    INCLUDE (principal_id, recorded_at)
    WHERE attribution = 'result';

DROP INDEX retrieval_feedback_training;
