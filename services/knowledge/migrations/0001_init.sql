-- Knowledge: sources, entities, bi-temporal fact versions, assertions with evidence,
-- proposal attempts, retrieval feedback and the outbox (the append-only change log).

CREATE TABLE sources (
    source_pk    uuid PRIMARY KEY,
    scope_id     uuid NOT NULL,
    source_id    text NOT NULL,
    source_type  text NOT NULL DEFAULT '',
    title        text NOT NULL DEFAULT '',
    uri          text NOT NULL DEFAULT '',
    observed_at  timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (scope_id, source_id)
);

CREATE TABLE entities (
    entity_id   uuid PRIMARY KEY,
    scope_id    uuid NOT NULL,
    name        text NOT NULL,
    name_key    text NOT NULL,
    aliases     text[] NOT NULL DEFAULT '{}',
    kind        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (scope_id, name_key)
);

-- One row per fact VERSION. A change closes the current version (superseded_at) and
-- inserts the next one with recorded_at equal to that instant; nothing else is updated.
CREATE TABLE facts (
    version_id      uuid PRIMARY KEY,
    fact_key        text NOT NULL,
    scope_id        uuid NOT NULL,
    subject         text NOT NULL,
    predicate       text NOT NULL,
    object          text NOT NULL,
    subject_norm    text NOT NULL,
    predicate_norm  text NOT NULL,
    object_norm     text NOT NULL,
    state           text NOT NULL
        CHECK (state IN ('PROPOSED', 'ACTIVE', 'RETRACTED', 'SUPERSEDED')),
    trust_tier      integer NOT NULL CHECK (trust_tier BETWEEN 0 AND 4),
    authority       double precision NOT NULL CHECK (authority >= 0 AND authority <= 1),
    valid_from      timestamptz,
    valid_to        timestamptz,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    superseded_at   timestamptz,
    repository      text NOT NULL DEFAULT '',
    branch          text NOT NULL DEFAULT '',
    code_path       text NOT NULL DEFAULT '',
    document_type   text NOT NULL DEFAULT '',
    source_type     text NOT NULL DEFAULT '',
    origin          text NOT NULL CHECK (origin IN ('curated', 'proposal')),
    created_by      uuid,
    CHECK (valid_from IS NULL OR valid_to IS NULL OR valid_to > valid_from),
    CHECK (superseded_at IS NULL OR superseded_at >= recorded_at)
);

CREATE UNIQUE INDEX facts_current_key ON facts (fact_key) WHERE superseded_at IS NULL;
CREATE INDEX facts_key_recorded ON facts (fact_key, recorded_at);
-- Conflict and "already known" look-ups among current versions.
CREATE INDEX facts_current_subject_predicate
    ON facts (scope_id, subject_norm, predicate_norm) WHERE superseded_at IS NULL;

CREATE TABLE assertions (
    assertion_id  uuid PRIMARY KEY,
    fact_key      text NOT NULL,
    scope_id      uuid NOT NULL,
    source_pk     uuid REFERENCES sources (source_pk),
    supports      boolean NOT NULL DEFAULT true,
    trust_tier    integer NOT NULL CHECK (trust_tier BETWEEN 0 AND 4),
    authority     double precision NOT NULL CHECK (authority >= 0 AND authority <= 1),
    status        text NOT NULL CHECK (status IN ('verified', 'pending', 'withdrawn')),
    asserted_by   uuid,
    recorded_at   timestamptz NOT NULL DEFAULT now(),
    -- Transaction time of the withdrawal, so known_as_of reads still see the assertion.
    withdrawn_at  timestamptz
);

CREATE UNIQUE INDEX assertions_fact_source ON assertions (fact_key, source_pk)
    WHERE source_pk IS NOT NULL;
CREATE INDEX assertions_fact ON assertions (fact_key);

CREATE TABLE evidence (
    evidence_id   uuid PRIMARY KEY,
    assertion_id  uuid NOT NULL REFERENCES assertions (assertion_id),
    text          text NOT NULL DEFAULT '',
    locator       text NOT NULL DEFAULT '',
    recorded_at   timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX evidence_assertion ON evidence (assertion_id);

CREATE TABLE proposal_attempts (
    attempt_id      uuid PRIMARY KEY,
    seq             bigserial UNIQUE,
    principal_id    uuid NOT NULL,
    scope_id        uuid NOT NULL,
    fact_key        text NOT NULL,
    subject         text NOT NULL,
    predicate       text NOT NULL,
    object          text NOT NULL,
    outcome         text NOT NULL
        CHECK (outcome IN ('created', 'deduplicated', 'skipped', 'conflicted', 'rejected')),
    reason          text NOT NULL DEFAULT '',
    conflicting_fact_keys text[] NOT NULL DEFAULT '{}',
    runtime         text NOT NULL DEFAULT '',
    session_ref     text NOT NULL DEFAULT '',
    task_ref        text NOT NULL DEFAULT '',
    repository_ref  text NOT NULL DEFAULT '',
    task_identity   text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX proposal_attempts_principal ON proposal_attempts (principal_id, seq);
CREATE INDEX proposal_attempts_task ON proposal_attempts (principal_id, task_identity, outcome);

CREATE TABLE retrieval_feedback (
    feedback_id    uuid PRIMARY KEY,
    principal_id   uuid NOT NULL,
    scope_id       uuid NOT NULL,
    pack_id        text NOT NULL,
    result_ref     text NOT NULL,
    signal         text NOT NULL CHECK (signal IN ('up', 'down')),
    query          text NOT NULL DEFAULT '',
    rank           integer NOT NULL DEFAULT 0,
    signal_vector  jsonb NOT NULL DEFAULT '{}',
    fact_key       text NOT NULL DEFAULT '',
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (principal_id, pack_id, result_ref)
);

-- The change log. Writers take one advisory lock before appending, so positions become
-- visible in commit order and a tailing reader never skips a late-committing position.
CREATE TABLE outbox (
    position    bigserial PRIMARY KEY,
    kind        text NOT NULL
        CHECK (kind IN ('fact_upserted', 'source_upserted', 'feedback_recorded')),
    version_id  uuid REFERENCES facts (version_id),
    scope_id    uuid NOT NULL,
    ref         text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now()
);
