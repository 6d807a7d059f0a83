-- Derived, rebuildable indexes of the retrieval service: one row per fact version
-- (the lexical leg) and the change-log cursor. Dropping both rebuilds them from the log.

CREATE TABLE documents (
    version_id    text PRIMARY KEY,
    fact_key      text NOT NULL,
    scope_id      text NOT NULL,
    state         smallint NOT NULL,
    subject       text NOT NULL,
    predicate     text NOT NULL,
    object        text NOT NULL,
    evidence      text NOT NULL DEFAULT '',
    valid_from    timestamptz,
    valid_to      timestamptz,
    recorded_at   timestamptz,
    superseded_at timestamptz,
    repository    text NOT NULL DEFAULT '',
    branch        text NOT NULL DEFAULT '',
    code_path     text NOT NULL DEFAULT '',
    document_type text NOT NULL DEFAULT '',
    source_type   text NOT NULL DEFAULT '',
    trust_tier    smallint NOT NULL DEFAULT 4,
    authority     double precision NOT NULL DEFAULT 0,
    change_position bigint NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (
        setweight(
            to_tsvector('english'::regconfig,
                        subject || ' ' || replace(predicate, '_', ' ') || ' ' || object),
            'A')
        || setweight(to_tsvector('english'::regconfig, evidence), 'B')
    ) STORED
);

CREATE INDEX documents_tsv_idx ON documents USING gin (tsv);
CREATE INDEX documents_scope_idx ON documents (scope_id);
CREATE INDEX documents_fact_key_idx ON documents (fact_key);

CREATE TABLE index_state (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    position   bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO index_state (id, position) VALUES (true, 0);
