-- Where a proposer was working (branch, repository-relative code path), shown to the
-- curators who review it; unlike the task context it takes no part in the task identity.
ALTER TABLE proposal_attempts
    ADD COLUMN branch    text NOT NULL DEFAULT '',
    ADD COLUMN code_path text NOT NULL DEFAULT '';

-- Who wrote each change-log entry (the curator, the ingesting principal, the proposer),
-- so the change feed says who changed what. NULL for entries recorded before this column.
ALTER TABLE outbox ADD COLUMN actor_id uuid;
