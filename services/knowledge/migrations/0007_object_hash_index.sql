-- An object may be 2048 characters (the published bound), up to 8 KB of UTF-8: more than a
-- btree entry holds (2704 bytes), so storing one failed. Objects are only ever matched for
-- equality (graph hops, known and conflicting facts), which a hash index serves at any size.
DROP INDEX facts_object;
CREATE INDEX facts_object ON facts USING hash (object_norm);
