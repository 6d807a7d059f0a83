-- Changes whenever documents change other than by rows written in change order: an
-- erasure (rows deleted), a re-embedding from the start of the log (rows rewritten at old
-- positions). A fresh database has its own. A replica's memory snapshot (memory_snapshot)
-- is reused only under the epoch it was made in.
ALTER TABLE index_state ADD COLUMN documents_epoch uuid NOT NULL DEFAULT gen_random_uuid();
