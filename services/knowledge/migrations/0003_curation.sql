-- Curation: the shared projects a proposal is addressed to, curator decisions, source
-- retraction and the audit log of administrative actions.

-- A PROPOSED version is addressed to the shared projects its proposer read when proposing;
-- curators of those projects review it.
CREATE TABLE proposal_targets (
    seq         bigserial PRIMARY KEY,
    version_id  uuid NOT NULL REFERENCES facts (version_id),
    fact_key    text NOT NULL,
    scope_id    uuid NOT NULL,
    UNIQUE (version_id, scope_id)
);
CREATE INDEX proposal_targets_scope ON proposal_targets (scope_id, seq);
CREATE INDEX proposal_targets_fact ON proposal_targets (fact_key);

-- One decision per reviewed PROPOSED version.
CREATE TABLE proposal_reviews (
    review_id        uuid PRIMARY KEY,
    fact_key         text NOT NULL,
    version_id       uuid NOT NULL UNIQUE REFERENCES facts (version_id),
    decision         text NOT NULL CHECK (decision IN ('verified', 'rejected')),
    reason           text NOT NULL DEFAULT '',
    curator_id       uuid NOT NULL,
    target_scope_id  uuid NOT NULL,
    target_fact_key  text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE sources ADD COLUMN retracted_at timestamptz;

-- A retracted source's withdrawn assertions stay as history; publishing the source again
-- adds a new assertion next to them.
DROP INDEX assertions_fact_source;
CREATE UNIQUE INDEX assertions_fact_source ON assertions (fact_key, source_pk)
    WHERE source_pk IS NOT NULL AND status <> 'withdrawn';
CREATE INDEX assertions_source ON assertions (source_pk) WHERE source_pk IS NOT NULL;

-- Administrative actions (GUIDE: "administrative source retraction uses audit_events").
-- Append-only; never holds source content.
CREATE TABLE audit_events (
    event_id    uuid PRIMARY KEY,
    action      text NOT NULL,
    actor_id    uuid NOT NULL,
    scope_id    uuid NOT NULL,
    target      text NOT NULL,
    reason      text NOT NULL DEFAULT '',
    details     jsonb NOT NULL DEFAULT '{}',
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_events_scope ON audit_events (scope_id, created_at);
