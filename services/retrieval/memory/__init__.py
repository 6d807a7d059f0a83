"""The in-process view of the indexed facts: BM25 columns, stored vectors, subjects."""
