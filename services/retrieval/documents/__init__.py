"""The lexical leg in PostgreSQL: the documents table, the cursor, the in-process memory."""
