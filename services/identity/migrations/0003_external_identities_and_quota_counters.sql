-- identity (MCP gateway): external OIDC identities mapped to principals, verified emails
-- that may link them, and the fixed-window quota counters every gateway replica shares.

CREATE TABLE external_identities (
    issuer text NOT NULL,
    subject text NOT NULL,
    principal_id uuid NOT NULL REFERENCES principals (principal_id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, subject)
);

CREATE INDEX external_identities_principal_idx ON external_identities (principal_id);

-- Only an email an identity provider asserted as verified is ever stored here.
CREATE TABLE principal_emails (
    email text PRIMARY KEY CHECK (email = lower(email)),
    principal_id uuid NOT NULL REFERENCES principals (principal_id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX principal_emails_principal_idx ON principal_emails (principal_id);

-- One row per (principal:bucket, window); a charge drops the key's older windows.
CREATE TABLE quota_counters (
    key text NOT NULL,
    window_start bigint NOT NULL,
    count integer NOT NULL CHECK (count >= 0),
    PRIMARY KEY (key, window_start)
);
