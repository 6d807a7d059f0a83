-- Cited lines that drifted (vera harvest, docs/harvest.md): a source's lines an assertion
-- cites changed or vanished at a later commit of its repository. The citation is served
-- stale with this reason until the mark is cleared (the lines say it again) or the fact
-- is corrected (a correction makes a new assertion).
ALTER TABLE assertions
    ADD COLUMN drift_reason      text NOT NULL DEFAULT ''
        CHECK (drift_reason IN ('', 'lines_changed', 'lines_vanished')),
    ADD COLUMN drift_commit      text NOT NULL DEFAULT '',
    ADD COLUMN drift_detected_at timestamptz;

CREATE INDEX assertions_drifted ON assertions (scope_id) WHERE drift_reason <> '';
