-- The index writer's latest memory snapshot (shared_snapshot.py), for a replica that
-- starts with none on its own disk (a new pod). One head row names the generation whose
-- chunks make the file; an erasure or a re-embedding deletes both in its transaction.
CREATE TABLE shared_snapshot (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    generation uuid NOT NULL,
    documents_epoch uuid NOT NULL,
    position bigint NOT NULL,
    size bigint NOT NULL,
    mac bytea NOT NULL,
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
