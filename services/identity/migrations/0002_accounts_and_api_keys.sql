-- identity: administrators, user accounts and API keys (stored as SHA-256 digests only).

ALTER TABLE principals ADD COLUMN admin boolean NOT NULL DEFAULT false;

CREATE TABLE api_keys (
    key_id text PRIMARY KEY,
    principal_id uuid NOT NULL REFERENCES principals (principal_id) ON DELETE CASCADE,
    secret_sha256 bytea NOT NULL,
    label text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);

CREATE INDEX api_keys_principal_idx ON api_keys (principal_id, created_at DESC);
