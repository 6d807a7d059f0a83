"""Snapshots of the in-process memory: on local disk, and the writer's copy in PostgreSQL."""
