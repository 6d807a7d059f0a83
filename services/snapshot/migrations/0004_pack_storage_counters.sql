-- Running byte counters for the context-pack storage quotas, kept exact in the same
-- transaction as every pack insert and delete (creation, expiry sweep, erasure), so a quota
-- check reads one row instead of re-summing a scope's packs.
ALTER TABLE context_packs ADD COLUMN stored_bytes bigint NOT NULL DEFAULT 0
    CHECK (stored_bytes >= 0);
UPDATE context_packs
   SET stored_bytes = octet_length(canonical_request::text) + octet_length(content::text);
ALTER TABLE context_packs ALTER COLUMN stored_bytes DROP DEFAULT;
CREATE INDEX context_packs_principal_idx ON context_packs (principal_id);

CREATE TABLE scope_pack_storage (
    scope_id uuid PRIMARY KEY,
    stored_bytes bigint NOT NULL CHECK (stored_bytes >= 0)
);
CREATE TABLE principal_pack_storage (
    principal_id uuid PRIMARY KEY,
    stored_bytes bigint NOT NULL CHECK (stored_bytes >= 0)
);
INSERT INTO scope_pack_storage (scope_id, stored_bytes)
    SELECT scope_id, sum(stored_bytes) FROM context_packs GROUP BY scope_id;
INSERT INTO principal_pack_storage (principal_id, stored_bytes)
    SELECT principal_id, sum(stored_bytes) FROM context_packs GROUP BY principal_id;

-- Cost attribution: one row per persisting call that named a usage_ref, deduplicated or
-- not. Not part of a pack's identity; it goes with its pack (expiry sweep, erasure).
CREATE TABLE context_pack_usage (
    pack_id uuid NOT NULL REFERENCES context_packs (pack_id) ON DELETE CASCADE,
    usage_ref text NOT NULL CHECK (char_length(usage_ref) BETWEEN 1 AND 512),
    recorded_at timestamptz NOT NULL
);
CREATE INDEX context_pack_usage_pack_idx ON context_pack_usage (pack_id);
CREATE INDEX context_pack_usage_ref_idx ON context_pack_usage (usage_ref);
