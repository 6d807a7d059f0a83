-- A fit is judged as its model serves (learned_rank.verdict): its queries replayed through
-- the serving path, scored at hit@5, recall@10 and MRR@10 (model_hit/hand_hit and
-- model_figure/hand_figure hold those for metric 'replay_mrr@10'). The serving check
-- switches off a model that falls behind the hand-set order on later feedback: when, and
-- the figures it saw (learned_rank.Guard), are kept for `vera rank status`; watched_since
-- is where that check starts reading feedback (activation or re-enable).
ALTER TABLE rank_models
    ADD COLUMN model_recall double precision,
    ADD COLUMN hand_recall double precision,
    ADD COLUMN replayed_queries integer,
    ADD COLUMN watched_since timestamptz,
    ADD COLUMN switched_off_at timestamptz,
    ADD COLUMN guard jsonb,
    DROP CONSTRAINT rank_models_outcome_check,
    ADD CONSTRAINT rank_models_outcome_check CHECK (outcome IN
        ('activated', 'too_little_feedback', 'one_sided_feedback', 'not_better', 'worse_at_top',
         'worse_at_recall'));

CREATE INDEX rank_models_switched_off ON rank_models (scope_id, switched_off_at DESC)
    WHERE switched_off_at IS NOT NULL;
