"""Rules of retrieval feedback: its input and attribution, and the ranking
training rows.

Pure code: no gRPC, no asyncpg.
"""


import uuid
from dataclasses import dataclass
from datetime import datetime

from vera.errors import InvalidInput
from vera.request_fields import optional_uuid, parse_uuid

from .domain import (
    FEEDBACK_PACK,
    FEEDBACK_RESULT,
    FEEDBACK_SIGNALS,
    FEEDBACK_UNATTRIBUTED,
    MAX_ID,
    MAX_QUERY,
    bound_text,
    require_text,
)


@dataclass(frozen=True)
class FeedbackIn:
    principal_id: uuid.UUID
    scope_id: uuid.UUID
    pack_id: str
    result_ref: str
    signal: str
    query: str
    rank: int
    signal_vector: dict[str, float]
    fact_key: str
    attribution: str = FEEDBACK_UNATTRIBUTED
    pack_scope_id: uuid.UUID | None = None


def make_feedback(
    *,
    principal_id: str,
    personal_scope_id: str,
    pack_id: str,
    result_ref: str,
    signal: str,
    query: str,
    rank: int,
    signal_vector: dict[str, float],
    fact_key: str,
    attribution: str = FEEDBACK_UNATTRIBUTED,
    pack_scope_id: str = "",
) -> FeedbackIn:
    """A client's claim about what it saw never becomes training data: the signal vector
    is kept only for a RESULT row (the gateway copied it from the stored pack); any other
    attribution stores none, whatever was sent."""
    principal = parse_uuid("principal_id", principal_id)
    scope = parse_uuid("personal_scope_id", personal_scope_id)
    if signal not in FEEDBACK_SIGNALS:
        raise InvalidInput("signal", "must be up or down", reason="out_of_range")
    if rank < 0:
        raise InvalidInput("rank", "must be >= 0", reason="out_of_range")
    pack = require_text("pack_id", pack_id, MAX_ID)
    result = require_text("result_ref", result_ref, MAX_ID)
    pack_scope = None
    if attribution == FEEDBACK_RESULT:
        if result == pack or rank < 1:
            raise InvalidInput(
                "attribution", "a result row names one ranked result", reason="invalid"
            )
        pack_scope = parse_uuid("pack_scope_id", pack_scope_id)
    elif attribution == FEEDBACK_PACK:
        if result != pack:
            raise InvalidInput(
                "attribution", "a pack row names the pack as its result", reason="invalid"
            )
        pack_scope = optional_uuid("pack_scope_id", pack_scope_id)
    elif attribution != FEEDBACK_UNATTRIBUTED:
        raise InvalidInput("attribution", reason="out_of_range")
    return FeedbackIn(
        principal_id=principal,
        scope_id=scope,
        pack_id=pack,
        result_ref=result,
        signal=signal,
        query=bound_text("query", query, MAX_QUERY),
        rank=rank,
        signal_vector=dict(signal_vector) if attribution == FEEDBACK_RESULT else {},
        fact_key=bound_text("fact_key", fact_key, MAX_ID).strip(),
        attribution=attribution,
        pack_scope_id=pack_scope,
    )


@dataclass(frozen=True)
class RankingFeedbackRow:
    """One training row: the query's digest groups one question; its text, the fact and
    the pack's scope let retrieval replay the question to judge a model."""

    feedback_id: uuid.UUID
    pack_id: str
    query_digest: str
    rank: int
    signal: str
    signal_vector: dict[str, float]
    recorded_at: datetime
    seq: int
    query: str = ""
    fact_key: str = ""
    pack_scope_id: uuid.UUID | None = None


@dataclass(frozen=True)
class FeedbackView:
    feedback_id: uuid.UUID
    signal: str
    created: bool
    recorded_at: datetime
