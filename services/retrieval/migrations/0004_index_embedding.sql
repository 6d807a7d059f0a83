-- Which embedding (model and precision, contract.embedding_version) made the indexed
-- vectors; the tailer replays the change log when the running one differs. NULL: an index
-- from before this column, replayed once.
ALTER TABLE index_state ADD COLUMN embedding text;
