-- identity: principals, workspaces, projects (scopes), memberships, repository mappings.

CREATE TABLE principals (
    principal_id uuid PRIMARY KEY,
    display_name text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('local', 'user')),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE workspaces (
    workspace_id uuid PRIMARY KEY,
    slug text NOT NULL UNIQUE,
    display_name text NOT NULL,
    owner_principal_id uuid NOT NULL REFERENCES principals (principal_id),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE workspace_members (
    workspace_id uuid NOT NULL REFERENCES workspaces (workspace_id) ON DELETE CASCADE,
    principal_id uuid NOT NULL REFERENCES principals (principal_id) ON DELETE CASCADE,
    role text NOT NULL CHECK (role IN ('owner', 'curator', 'member')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, principal_id)
);

CREATE INDEX workspace_members_principal_idx ON workspace_members (principal_id);

CREATE TABLE projects (
    project_id uuid PRIMARY KEY,
    slug text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    display_name text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('personal', 'shared')),
    owner_principal_id uuid NOT NULL REFERENCES principals (principal_id),
    workspace_id uuid REFERENCES workspaces (workspace_id),
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (kind = 'shared' OR workspace_id IS NULL)
);

-- Exactly one personal scope per principal.
CREATE UNIQUE INDEX projects_one_personal_idx ON projects (owner_principal_id)
    WHERE kind = 'personal';
CREATE INDEX projects_owner_idx ON projects (owner_principal_id);
CREATE INDEX projects_workspace_idx ON projects (workspace_id) WHERE workspace_id IS NOT NULL;

CREATE TABLE repository_mappings (
    project_id uuid NOT NULL REFERENCES projects (project_id) ON DELETE CASCADE,
    canonical_repository text NOT NULL,
    created_by uuid NOT NULL REFERENCES principals (principal_id),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project_id, canonical_repository)
);

CREATE INDEX repository_mappings_repository_idx ON repository_mappings (canonical_repository);
