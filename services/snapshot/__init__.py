"""The snapshot service."""
