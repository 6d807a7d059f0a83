-- What the in-process index (memory.py) needs to rebuild itself on start without
-- re-embedding: the first citation's source and locator (a fact's neighbours are the facts
-- next to it in its source) and the fact's vector (float32, little-endian).

ALTER TABLE documents ADD COLUMN source_id text NOT NULL DEFAULT '';
ALTER TABLE documents ADD COLUMN locator text NOT NULL DEFAULT '';
ALTER TABLE documents ADD COLUMN vector bytea;
