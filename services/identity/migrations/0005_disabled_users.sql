-- identity: an administrator disables a user who left (and re-enables one who returns).
-- A disabled user's API keys authenticate nothing, its MCP tokens are refused
-- (principal_disabled) and its console sessions end; nothing it wrote is touched.
ALTER TABLE principals ADD COLUMN disabled_at timestamptz;
