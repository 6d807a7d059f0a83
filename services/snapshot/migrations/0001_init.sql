-- snapshot: persisted context packs (immutable, TTL-bound, readable only by their principal).

CREATE TABLE context_packs (
    pack_id uuid PRIMARY KEY,
    principal_id uuid NOT NULL,
    scope_id uuid NOT NULL,
    canonical_request jsonb NOT NULL,
    content jsonb NOT NULL,
    request_hash text NOT NULL,
    content_hash text NOT NULL,
    assembler_version text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    CHECK (expires_at > created_at)
);

-- Dedupe lookup: the same principal persisting the same request with the same results.
CREATE INDEX context_packs_dedupe_idx
    ON context_packs (principal_id, scope_id, request_hash, content_hash, assembler_version);
-- The sweeper deletes by expiry; the future per-scope quota counts by scope.
CREATE INDEX context_packs_expires_idx ON context_packs (expires_at);
CREATE INDEX context_packs_scope_idx ON context_packs (scope_id);
