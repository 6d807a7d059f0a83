-- The knowledge model: corrections, entity alias keys, source artifact versions and
-- derived communities.

-- A correction closes the old version and records a SUPERSEDED version that names the
-- fact that replaced it; the replacement names the fact it corrected.
ALTER TABLE facts ADD COLUMN superseded_by text NOT NULL DEFAULT '';
ALTER TABLE facts ADD COLUMN corrects text NOT NULL DEFAULT '';
ALTER TABLE facts ADD COLUMN correction_reason text NOT NULL DEFAULT '';

-- Entities and facts across versions, by subject / object (graph traversal).
CREATE INDEX facts_subject ON facts (scope_id, subject_norm);
CREATE INDEX facts_object ON facts (scope_id, object_norm);

-- Normalized aliases (NFKC, casefold, collapsed whitespace), written by the service.
ALTER TABLE entities ADD COLUMN alias_keys text[] NOT NULL DEFAULT '{}';
UPDATE entities SET alias_keys = ARRAY(SELECT lower(btrim(a)) FROM unnest(aliases) AS a);
CREATE INDEX entities_alias_keys ON entities USING gin (alias_keys);

-- Every observed state of a source is one artifact version; the sources row is the latest.
CREATE TABLE source_versions (
    source_pk    uuid NOT NULL REFERENCES sources (source_pk),
    version      integer NOT NULL,
    source_type  text NOT NULL DEFAULT '',
    title        text NOT NULL DEFAULT '',
    uri          text NOT NULL DEFAULT '',
    observed_at  timestamptz,
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source_pk, version)
);
INSERT INTO source_versions (source_pk, version, source_type, title, uri, observed_at, recorded_at)
SELECT source_pk, 1, source_type, title, uri, observed_at, created_at FROM sources;

-- One derivation of communities for one scope at one change-log position.
CREATE TABLE community_runs (
    run_id           uuid PRIMARY KEY,
    scope_id         uuid NOT NULL,
    change_position  bigint NOT NULL,
    algorithm        text NOT NULL,
    seed             integer NOT NULL,
    summarizer       text NOT NULL,
    fact_count       integer NOT NULL,
    entity_count     integer NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (scope_id, change_position, algorithm, summarizer)
);
CREATE INDEX community_runs_scope ON community_runs (scope_id, created_at DESC);

CREATE TABLE communities (
    community_id  uuid PRIMARY KEY,
    run_id        uuid NOT NULL REFERENCES community_runs (run_id),
    scope_id      uuid NOT NULL,
    ordinal       integer NOT NULL,
    label         text NOT NULL,
    summary       text NOT NULL,
    entities      text[] NOT NULL,
    search        tsvector NOT NULL
);
CREATE INDEX communities_run ON communities (run_id, ordinal);
CREATE INDEX communities_search ON communities USING gin (search);

-- Lineage: the exact fact versions a community was derived from.
CREATE TABLE community_facts (
    community_id  uuid NOT NULL REFERENCES communities (community_id),
    fact_key      text NOT NULL,
    version_id    uuid NOT NULL REFERENCES facts (version_id),
    PRIMARY KEY (community_id, fact_key)
);
