-- What an assertion was before it was withdrawn, so a known_as_of read from before the
-- withdrawal shows it as it was then (a retracted source's assertions were verified; a
-- retracted or rejected proposal's were pending).
ALTER TABLE assertions ADD COLUMN status_before_withdrawal text
    CHECK (status_before_withdrawal IN ('verified', 'pending'));
-- Rows withdrawn before this column existed: only a source's assertions carry a source.
UPDATE assertions
SET status_before_withdrawal = CASE WHEN source_pk IS NOT NULL THEN 'verified' ELSE 'pending' END
WHERE status = 'withdrawn';
