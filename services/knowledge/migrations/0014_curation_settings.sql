-- A shared project's curation settings (issue 39 item 16). No row: the defaults, so every
-- project that existed before keeps them. two_person_verification: verifying a proposal is
-- refused to the principal that proposed it.
CREATE TABLE curation_settings (
    scope_id                 uuid PRIMARY KEY,
    two_person_verification  boolean NOT NULL DEFAULT false,
    changed_by               uuid NOT NULL,
    changed_at               timestamptz NOT NULL DEFAULT now()
);
