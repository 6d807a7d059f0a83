"""PostgreSQL plumbing: pools, per-service schema migrations, the embedded server."""
