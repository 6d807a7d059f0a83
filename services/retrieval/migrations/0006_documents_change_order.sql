-- The start-up load pages through documents in change order (keyset: position, then
-- version id); without this each page sorted the whole table.
CREATE INDEX documents_change_order ON documents (change_position, version_id);
