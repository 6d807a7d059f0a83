"""The identity service."""
