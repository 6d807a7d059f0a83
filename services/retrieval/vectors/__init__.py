"""The vector indexes: qdrant-edge in process, or a Qdrant server."""
