-- A scoped change-log read (ListChanges with scope_ids, e.g. snapshot creation) walks only
-- its scopes' positions.
CREATE INDEX outbox_scope_position_idx ON outbox (scope_id, position);
