-- snapshot: knowledge snapshots (immutable, no expiry) and gateway idempotency keys.

CREATE TABLE snapshots (
    snapshot_id uuid PRIMARY KEY,
    principal_id uuid NOT NULL,
    scope_id uuid NOT NULL,
    as_of timestamptz NOT NULL,
    known_as_of timestamptz NOT NULL,
    fact_count bigint NOT NULL CHECK (fact_count >= 0),
    source_count bigint NOT NULL CHECK (source_count >= 0),
    newest_source_observed_at timestamptz,
    oldest_source_observed_at timestamptz,
    change_position bigint NOT NULL,
    assembler_version text NOT NULL,
    ontology_version text NOT NULL,
    policy_version text NOT NULL,
    embedding_version text NOT NULL,
    index_version text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX snapshots_principal_idx ON snapshots (principal_id, created_at);

-- The frozen fact versions of each snapshot.
CREATE TABLE snapshot_facts (
    snapshot_id uuid NOT NULL REFERENCES snapshots (snapshot_id),
    fact_key text NOT NULL,
    version_id text NOT NULL,
    source_ids text[] NOT NULL,
    PRIMARY KEY (snapshot_id, version_id)
);

-- Snapshots are immutable: refuse updates and deletes at the database.
CREATE FUNCTION snapshot_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'snapshots are immutable';
END;
$$;
CREATE TRIGGER snapshots_immutable BEFORE UPDATE OR DELETE ON snapshots
    FOR EACH ROW EXECUTE FUNCTION snapshot_immutable();
CREATE TRIGGER snapshot_facts_immutable BEFORE UPDATE OR DELETE ON snapshot_facts
    FOR EACH ROW EXECUTE FUNCTION snapshot_immutable();

-- One row per (principal, key): a claim while the first call runs, then its result.
CREATE TABLE idempotency_keys (
    principal_id uuid NOT NULL,
    idempotency_key text NOT NULL,
    request_hash text NOT NULL,
    completed boolean NOT NULL DEFAULT false,
    result_json text,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (principal_id, idempotency_key)
);
CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at);
