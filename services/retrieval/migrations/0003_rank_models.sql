-- Learned ranking models (learned_rank.py): every fit is recorded, activated or not, with
-- what it was trained on and its out-of-fold figure against the hand-set ranking, so
-- `vera rank status` can say why the hand-set ranking still serves. scope_id NULL is the
-- deployment-wide model. At most one model per scope is active.
CREATE TABLE rank_models (
    model_id            uuid PRIMARY KEY,
    scope_id            uuid,
    outcome             text NOT NULL CHECK (outcome IN
        ('activated', 'too_little_feedback', 'one_sided_feedback', 'not_better')),
    active              boolean NOT NULL DEFAULT false,
    training_rows       integer NOT NULL,
    training_queries    integer NOT NULL,
    evaluated_packs     integer NOT NULL,
    metric              text NOT NULL,
    model_figure        double precision NOT NULL,
    hand_figure         double precision NOT NULL,
    -- The newest feedback row it saw: the background fit counts new rows after it.
    newest_feedback_at  timestamptz,
    -- Standardization and weights (learned_rank.LinearRanker); NULL when nothing was fitted.
    parameters          jsonb,
    trained_at          timestamptz NOT NULL DEFAULT now(),
    CHECK (NOT active OR parameters IS NOT NULL)
);

CREATE UNIQUE INDEX rank_models_one_active
    ON rank_models ((coalesce(scope_id, '00000000-0000-0000-0000-000000000000'::uuid)))
    WHERE active;
CREATE INDEX rank_models_by_scope ON rank_models (scope_id, trained_at DESC);

-- Bumped in the transaction that activates or turns off a model: a serving process polls
-- this one row and reloads its active models when it moved (no restart).
CREATE TABLE rank_generation (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    generation  bigint NOT NULL
);
INSERT INTO rank_generation (singleton, generation) VALUES (true, 0);
