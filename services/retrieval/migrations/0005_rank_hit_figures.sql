-- The activation rule also judges the top of each pack (learned_rank.verdict): hit@5 out of
-- fold for the model and the hand-set order, next to the MRR figures, and the outcome of a
-- model that loses there. NULL: a fit recorded before hit@5 was measured.
ALTER TABLE rank_models
    ADD COLUMN model_hit double precision,
    ADD COLUMN hand_hit double precision,
    DROP CONSTRAINT rank_models_outcome_check,
    ADD CONSTRAINT rank_models_outcome_check CHECK (outcome IN
        ('activated', 'too_little_feedback', 'one_sided_feedback', 'not_better', 'worse_at_top'));
