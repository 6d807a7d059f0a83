-- identity: workspace membership needs the invitee's consent, and a verified email links
-- external identities only from the issuer it was verified by.

-- A pending invitation; accepting moves it into workspace_members, declining deletes it.
-- Until then the invitee reads nothing of the workspace.
CREATE TABLE workspace_invitations (
    invitation_id uuid PRIMARY KEY,
    workspace_id uuid NOT NULL REFERENCES workspaces (workspace_id) ON DELETE CASCADE,
    principal_id uuid NOT NULL REFERENCES principals (principal_id) ON DELETE CASCADE,
    role text NOT NULL CHECK (role IN ('owner', 'curator', 'member')),
    inviter_principal_id uuid NOT NULL REFERENCES principals (principal_id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (workspace_id, principal_id)
);

CREATE INDEX workspace_invitations_principal_idx
    ON workspace_invitations (principal_id, created_at, invitation_id);

-- Every existing email was stored by the just-in-time link of one external identity, in the
-- same transaction: that identity's issuer is the one it was verified by.
ALTER TABLE principal_emails ADD COLUMN issuer text;

UPDATE principal_emails e SET issuer = first.issuer
FROM (
    SELECT DISTINCT ON (principal_id) principal_id, issuer
    FROM external_identities ORDER BY principal_id, created_at, issuer
) AS first
WHERE first.principal_id = e.principal_id;

DELETE FROM principal_emails WHERE issuer IS NULL;

ALTER TABLE principal_emails ALTER COLUMN issuer SET NOT NULL;
ALTER TABLE principal_emails DROP CONSTRAINT principal_emails_pkey;
ALTER TABLE principal_emails ADD PRIMARY KEY (issuer, email);
