"""Output schemas (JSON Schema) of the coding-profile tools.

They describe exactly what ``views`` and ``handlers`` return; the MCP client validates
every ``structuredContent`` against them, so a drift fails loudly in tests.
"""

from __future__ import annotations

from typing import Any

from vera.config import KnowledgeSettings

STR = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
OPT_STR = {"type": ["string", "null"]}
OPT_INT = {"type": ["integer", "null"]}
OPT_NUM = {"type": ["number", "null"]}
TS = {"type": ["string", "null"], "description": "ISO-8601 instant (UTC) or null"}
STR_LIST = {"type": "array", "items": STR}
# What a retrieval answer's ``retrieval_mode`` may say; lexical_only is a degraded answer.
HYBRID_MODE = "hybrid"
DEGRADED_MODE = "lexical_only"
RETRIEVAL_MODES = (HYBRID_MODE, DEGRADED_MODE)


# What a reader of a result needs to know about two of its fields, said once here and added
# to the description of every tool whose result shows them (``explained``).
STALE_SOURCE_DAYS_DEFAULT: int = KnowledgeSettings.model_fields["stale_source_days"].default
TRUST_TIER_NOTE = (
    "trust_tier runs from 0, the most trusted (curated, human-verified), to 4, unverified "
    "agent text: lower is better."
)
FRESHNESS_NOTE = (
    "A source_stale warning (or stale source) means the cited source was last observed "
    f"more than {STALE_SOURCE_DAYS_DEFAULT} days ago (VERA_KNOWLEDGE__STALE_SOURCE_DAYS, "
    "default); a curator refreshes it by ingesting the same source id with a newer "
    "observed_at, which updates it in place. A lines_changed or lines_vanished warning means "
    "the lines the fact cites from a repository file changed at a later commit: check the "
    "file before relying on it."
)
_NOTES = (
    (frozenset({"trust_tier"}), TRUST_TIER_NOTE),
    (frozenset({"freshness_warnings", "freshness"}), FRESHNESS_NOTE),
)


def _property_names(schema: Any) -> set[str]:
    names: set[str] = set()
    if isinstance(schema, dict):
        names |= set(schema.get("properties") or {})
        for value in schema.values():
            names |= _property_names(value)
    elif isinstance(schema, list):
        for value in schema:
            names |= _property_names(value)
    return names


def explained(description: str, output_schema: dict[str, Any]) -> str:
    """``description`` with the note on each field the output shows that needs one."""
    shown = _property_names(output_schema)
    notes = [note for fields, note in _NOTES if fields & shown]
    return " ".join([description, *notes])


def obj(
    properties: dict[str, Any], required: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties}
    out["required"] = list(properties) if required is None else required
    out.update(extra)
    return out


def array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


CITATION = obj(
    {
        "source_id": STR,
        "locator": STR,
        "title": STR,
        "uri": STR,
        "excerpt": STR,
        "verification": STR,
    },
    required=["source_id", "locator", "verification"],
)

_FACT_PROPS: dict[str, Any] = {
    "fact_key": STR,
    "subject": STR,
    "predicate": STR,
    "object": STR,
    "state": STR,
    "trust_tier": INT,
    "authority": NUM,
    "valid_from": TS,
    "valid_to": TS,
    "recorded_at": TS,
    "project_id": STR,
    "repository": STR,
    "branch": STR,
    "code_path": STR,
    "document_type": STR,
    "source_type": STR,
    "citations": array(CITATION),
    "conflicting_fact_keys": STR_LIST,
    # Corrections, present only when set: the key that replaced this fact (a read of a
    # corrected key answers its last version, state superseded), the key it corrected.
    "superseded_by": STR,
    "corrects": STR,
}
_FACT_REQUIRED = [
    "fact_key",
    "subject",
    "predicate",
    "object",
    "state",
    "trust_tier",
    "authority",
    "valid_from",
    "valid_to",
    "recorded_at",
    "project_id",
    "citations",
]

FACT = obj(_FACT_PROPS, required=_FACT_REQUIRED)

RESULT = obj(
    {
        **_FACT_PROPS,
        "score": NUM,
        "rank": INT,
        "result_ref": STR,
        "signals": {"type": "object", "additionalProperties": NUM},
    },
    required=[*_FACT_REQUIRED, "score", "rank", "result_ref", "signals"],
)

CONFLICT = obj({"subject": STR, "predicate": STR, "fact_keys": STR_LIST})
FRESHNESS_WARNING = obj({"fact_key": STR, "source_id": STR, "reason": STR, "observed_at": TS})
OMISSION = obj({"fact_key": STR, "reason": STR})

PROJECT_REF = obj({"project_id": STR, "slug": STR})
PROJECT = obj({"project_id": STR, "slug": STR, "display_name": STR, "kind": STR})

_RETRIEVAL_COMMON = {
    "results": array(RESULT),
    "conflicts": array(CONFLICT),
    "freshness_warnings": array(FRESHNESS_WARNING),
    "omitted": array(OMISSION),
    "empty_reason": OPT_STR,
    "retrieval_mode": {
        "type": "string",
        "enum": list(RETRIEVAL_MODES),
        "description": (
            "hybrid: dense and lexical legs fused; lexical_only: degraded, the vector "
            "index or embedding model was unavailable, so only lexical matches were ranked."
        ),
    },
}

CONTEXT_REQUEST = {
    "type": "object",
    "description": (
        "The canonical request: every argument with its default filled in, except "
        "usage_ref (cost attribution, recorded beside the pack)."
    ),
    "properties": {"query": STR, "project": PROJECT_REF},
    "required": ["query", "project"],
}

CONTEXT_ENVELOPE = obj(
    {
        "persisted": BOOL,
        "pack_id": OPT_STR,
        **_RETRIEVAL_COMMON,
        "token_estimate": INT,
        "expires_at": TS,
        "request": CONTEXT_REQUEST,
        "assembler_version": STR,
    }
)

SEARCH = obj(_RETRIEVAL_COMMON)

CAPABILITY = obj({"class": STR, "scope": STR, "granted": BOOL})

REPOSITORY_RESOLUTION = obj(
    {
        "status": {
            "type": "string",
            "enum": [
                "selected",
                "selection_required",
                "unmapped",
                "unsupported_repository",
                "personal_only",
            ],
        },
        "canonical_repository": OPT_STR,
        "project": nullable(PROJECT),
        "candidates": array(PROJECT),
        "branch": OPT_STR,
        "code_path": OPT_STR,
    }
)

BOOTSTRAP = obj(
    {
        "server_version": STR,
        "contract_versions": obj({"vera_integration_contract": INT, "mcp_protocol": OPT_STR}),
        "principal": obj({"principal_id": STR, "personal_scope_id": STR}),
        "auth_profile": STR,
        "capabilities": array(CAPABILITY),
        "tool_profile": STR,
        "visible_tools": STR_LIST,
        "readable_projects": array(PROJECT),
        "repository": REPOSITORY_RESOLUTION,
        # One resolution per root of a multi-root workspace (empty unless roots were given).
        "roots": array(REPOSITORY_RESOLUTION),
        "save_mode": obj(
            {
                "default": STR,
                "allowed": STR_LIST,
                "auto_propose_allowed": BOOL,
            }
        ),
        # What knowledge_propose accepts: the knowledge service's ontology.
        "proposal_policy": obj(
            {
                "allowed_predicates": STR_LIST,
                "single_valued_predicates": STR_LIST,
                "ontology_version": STR,
            }
        ),
    }
)

SOURCE = obj({"source_id": STR, "source_type": STR, "title": STR, "uri": STR, "observed_at": TS})
EVIDENCE = obj({"evidence_id": STR, "text": STR, "locator": STR})
ASSERTION = obj(
    {
        "assertion_id": STR,
        "supports": BOOL,
        "trust_tier": INT,
        "authority": NUM,
        "verification": STR,
        "source": nullable(SOURCE),
        "evidence": array(EVIDENCE),
        "recorded_at": TS,
    }
)

EXPLAIN = obj({"fact": FACT, "supporting": array(ASSERTION), "refuting": array(ASSERTION)})

EVIDENCE_ROW = obj(
    {
        "fact_key": STR,
        "assertion_id": STR,
        "supports": BOOL,
        "verification": STR,
        "trust_tier": INT,
        "authority": NUM,
        "evidence_id": OPT_STR,
        "text": OPT_STR,
        "locator": OPT_STR,
        "source": nullable(SOURCE),
    }
)

EVIDENCE_LIST = obj(
    {
        "fact_key": STR,
        "evidence": array(EVIDENCE_ROW),
        "total": INT,
        "empty_reason": OPT_STR,
    }
)

FEEDBACK = obj(
    {
        "feedback_id": STR,
        "context_pack_id": STR,
        "result_ref": STR,
        "signal": {"type": "string", "enum": ["up", "down"]},
        "created": BOOL,
        "recorded_at": TS,
        "level": {"type": "string", "enum": ["result", "pack"]},
    }
)

PROPOSE = obj(
    {
        "outcome": STR,
        "fact": nullable(FACT),
        "attempt_id": STR,
        "reason": OPT_STR,
        "conflicting_fact_keys": STR_LIST,
        "review_project": OPT_STR,
    }
)

RETRACT = obj(
    {
        "status": {"type": "string", "enum": ["retracted", "already_retracted"]},
        "fact": nullable(FACT),
    }
)

TASK_CONTEXT = obj(
    {"runtime": OPT_STR, "session_ref": OPT_STR, "task_ref": OPT_STR, "repository_ref": OPT_STR}
)

ATTEMPT = obj(
    {
        "attempt_id": STR,
        "outcome": STR,
        "reason": OPT_STR,
        "fact_key": STR,
        "subject": STR,
        "predicate": STR,
        "object": STR,
        "fact_state": STR,
        "context": TASK_CONTEXT,
        "created_at": TS,
        # A verified proposal: the key of the shared fact it became (its own reads
        # superseded); a corrected fact: its replacement's key.
        "superseded_by": OPT_STR,
        # A conflicted attempt created nothing: the active facts it contradicts.
        "conflicting_fact_keys": STR_LIST,
    }
)

REPORT = obj(
    {
        "attempts": array(ATTEMPT),
        "next_cursor": OPT_STR,
        "counts": {"type": "object", "additionalProperties": INT},
        "state_counts": {"type": "object", "additionalProperties": INT},
        "total": INT,
    }
)
