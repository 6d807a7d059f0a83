"""Argument declarations that more than one tool family takes, declared once (each a
``bounds.Param``: its schema and its check)."""

from __future__ import annotations

from vera.gateway.bounds import enum, string, timestamp
from vera.limits import ID_LIKE, REPOSITORY_PATH_CURSOR

AS_OF = timestamp("as_of", "Valid-time boundary (ISO-8601): knowledge as it was true then.")
KNOWN_AS_OF = timestamp(
    "known_as_of", "Transaction-time boundary (ISO-8601): knowledge as it was recorded then."
)
CONFLICT_HANDLING = enum(
    "conflict_handling",
    ("include", "exclude", "only"),
    "Include disputed facts (flagged), exclude them, or return only them.",
    default="include",
)
CURSOR = string("cursor", REPOSITORY_PATH_CURSOR, "next_cursor from the previous page.")
# The one project a call resolves (the coding and snapshot tools).
RESOLVED_PROJECT = string(
    "project",
    ID_LIKE,
    "A project id or slug. Omit to use the single shared project; several readable "
    "projects then fail with ambiguous_project.",
)
