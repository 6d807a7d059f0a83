-- A fencing token: each process that becomes the index's writer bumps it, and the cursor
-- moves only in a transaction that still sees its own value, so a writer that lost its
-- lease without noticing (a database failover) cannot commit a page over its successor.
ALTER TABLE index_state ADD COLUMN writer_epoch bigint NOT NULL DEFAULT 0;
