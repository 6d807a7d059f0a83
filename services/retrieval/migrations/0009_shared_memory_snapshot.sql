-- The index writer's latest memory snapshot (shared_snapshot.py), for a replica that
-- starts with none on its own disk (a new pod). One head row names the generation whose
-- chunks make the file; an erasure or a re-embedding deletes both in its transaction.
CREATE TABLE shared_snapshot (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    generation uuid NOT NULL,
    documents_epoch uuid NOT NULL,
    header text NOT NULL,       -- the file's first line: its format, key and position
    size bigint NOT NULL,
    head_mac bytea NOT NULL,    -- over generation, size and header: checked before a copy
    mac bytea NOT NULL,         -- over the file: checked before it is read
    published_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE shared_snapshot_chunks (
    generation uuid NOT NULL,
    seq integer NOT NULL,
    chunk bytea NOT NULL,
    PRIMARY KEY (generation, seq)
);
-- A pickle of float arrays does not compress: skip TOAST's attempt.
ALTER TABLE shared_snapshot_chunks ALTER COLUMN chunk SET STORAGE EXTERNAL;
