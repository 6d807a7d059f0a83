"""The knowledge service."""
