"""Hybrid search and bounded context assembly (the retrieval domain).

query -> embed -> dense ANN and lexical legs (same scope/state/time/attribute filters)
-> candidate features (exact dense cosine, the neighbourhood's cosine, subject mentioned in
the query) -> calibrated fusion -> authoritative re-read from knowledge (scope re-check)
-> rerank of a short list -> filters, binding boosts, conflict handling -> order -> limit
-> (context) token budget. Imports only the ports; the adapters live next to it.
When the dense leg fails (embedder or vector index), the lexical leg answers alone and the
outcome says so (``RetrievalMode.LEXICAL_ONLY``) instead of the call failing.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from vera import limits
from vera.errors import InvalidInput
from vera.observability.tracing import span
from vera.services.retrieval.domain import (
    Candidate,
    CandidateFeatures,
    Citation,
    Conflict,
    ConflictHandling,
    ContextOutcome,
    Fact,
    Filters,
    FreshnessWarning,
    IndexQuery,
    Omission,
    Result,
    RetrievalMode,
    SearchOutcome,
)
from vera.services.retrieval.memory.text import asks_when, says_when
from vera.services.retrieval.ports import (
    Embedder,
    FactSource,
    Reranker,
    SearchIndex,
    VectorIndex,
)
from vera.services.retrieval.rank import learned as learned_rank
from vera.services.retrieval.rank.learned import ActiveModels

log = logging.getLogger(__name__)
# Each stage's span (vera.observability.tracing): counts and scores only, never text.
STAGE = "vera.retrieval.stage"
CANDIDATES = "vera.retrieval.candidates"
RESULTS = "vera.retrieval.results"
TOP_SCORE = "vera.retrieval.top_score"

# Calibrated fusion: lexical BM25 / the query's best BM25 (0..1) and dense cosine (already
# on a fixed scale), equally weighted; the cosine of the fact's neighbourhood (its source
# context) adds at half weight and a fact whose subject the query names gains a fixed
# bonus; for a question that asks when, a re-read fact whose text says when gains one too.
# Each part earns its place in the benchmark's ablation and fusion study (bench/ablation.py;
# the bonuses chosen leave-one-conversation-out there).
DENSE_WEIGHT = 0.5
LEXICAL_WEIGHT = 0.5
DENSE_CONTEXT_WEIGHT = 0.5
ENTITY_BONUS = 0.3
TIME_BONUS = 0.2
# Facts re-read from knowledge per call: enough for the limit after filters drop a few.
REREAD_MIN = 30
# A candidate with no lexical overlap must be at least this close in embedding space;
# below it MiniLM similarities are noise, and abstaining beats returning noise.
MIN_DENSE_SIMILARITY = 0.2
# Binding boosts multiply the fused score; they raise matches and hide nothing.
REPOSITORY_BOOST = 1.25
BRANCH_BOOST = 1.1
CODE_PATH_BOOST = 1.15

DEFAULT_LIMIT = 10
MAX_LIMIT = limits.LIMIT[1]
DEFAULT_TOKEN_BUDGET = 2000
MAX_TOKEN_BUDGET = limits.TOKEN_BUDGET[1]
MAX_QUERY_CHARS = limits.QUERY[1]
CHARS_PER_TOKEN = 4
OMITTED_CAP = 50

REASON_LIMIT = "limit"
REASON_CONFLICT_HANDLING = "conflict_handling"
REASON_TOKEN_BUDGET = "token_budget"
REASON_SOURCE_STALE = "source_stale"
EMPTY_NO_FACTS_IN_SCOPE = "no_facts_in_scope"
EMPTY_NO_MATCH = "no_match"
EMPTY_FILTERED_OUT = "filtered_out"
EMPTY_TOKEN_BUDGET = "token_budget"


@dataclass
class _Ordering:
    ordered: list[Result] = field(default_factory=list)  # positions not yet assigned
    conflict_omitted: list[str] = field(default_factory=list)
    empty_reason: str = ""
    # Candidates below the re-read short list (scoped by the index legs, not re-read).
    unread: list[str] = field(default_factory=list)
    assembler_version: str = ""  # the contract this order was made under
    retrieval_mode: RetrievalMode = RetrievalMode.HYBRID


@dataclass(frozen=True)
class Stages:
    """Which ordering stages run (all on by default; the benchmark's ablation turns each off)."""

    dense_context: bool = True
    entities: bool = True
    rerank: bool = True


# How the two legs' scores are put on one scale before they are weighted.
SCALE_BEST = "best"  # lexical over the query's best, dense cosine as it is
SCALE_MINMAX = "minmax"  # each leg over its candidates' span (0..1)
SCALE_ZSCORE = "zscore"  # each leg in standard deviations from its candidates' mean
SCALES = (SCALE_BEST, SCALE_MINMAX, SCALE_ZSCORE)


@dataclass(frozen=True)
class Fusion:
    """How the legs are fused (the service's default; the benchmark's fusion study varies
    it)."""

    scale: str = SCALE_BEST
    dense_weight: float = DENSE_WEIGHT
    lexical_weight: float = LEXICAL_WEIGHT
    entity_bonus: float = ENTITY_BONUS
    # Added to a re-read fact whose text says when, for a question that asks when.
    time_bonus: float = TIME_BONUS

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ValueError(f"fusion: unknown scale {self.scale!r}")


def _scaled(values: Mapping[str, float], scale: str) -> dict[str, float]:
    """``values`` (every candidate's, 0 where the leg missed it) on the fusion's scale."""
    if scale == SCALE_BEST or not values:
        return dict(values)
    numbers = list(values.values())
    if scale == SCALE_MINMAX:
        low, span = min(numbers), max(numbers) - min(numbers)
        return {k: (v - low) / span if span > 0 else 0.0 for k, v in values.items()}
    mean = sum(numbers) / len(numbers)
    std = math.sqrt(sum((v - mean) ** 2 for v in numbers) / len(numbers))
    return {k: (v - mean) / std if std > 0 else 0.0 for k, v in values.items()}


def fuse(
    dense: Sequence[Candidate],
    lexical: Sequence[Candidate],
    features: Mapping[str, CandidateFeatures] | None = None,
    stages: Stages = Stages(),
    fusion: Fusion = Fusion(),
) -> dict[str, tuple[float, float, float]]:
    """fact_key -> (dense, normalized lexical, fused), best version per key, above the floor.

    ``features`` (by version id) replace the dense leg's cosine with the exact one for every
    candidate of either leg and add the neighbourhood and entity terms."""
    features = features or {}
    best: dict[str, tuple[float, float, float]] = {}
    lexical_by_version: dict[str, float] = {}
    for hit in lexical:
        lexical_by_version[hit.version_id] = max(
            lexical_by_version.get(hit.version_id, 0.0), hit.score
        )
    best_lexical = max(lexical_by_version.values(), default=0.0)
    dense_by_version = {hit.version_id: max(hit.score, 0.0) for hit in dense}
    keys = {hit.version_id: hit.fact_key for hit in [*dense, *lexical]}
    cosines: dict[str, float] = {}
    lexicals: dict[str, float] = {}
    for version in keys:
        feature = features.get(version)
        d = feature.dense if feature is not None else dense_by_version.get(version, 0.0)
        cosines[version] = max(d, 0.0)
        lex = lexical_by_version.get(version, 0.0)
        lexicals[version] = lex / best_lexical if best_lexical > 0 else 0.0
    dense_scaled = _scaled(cosines, fusion.scale)
    lexical_scaled = _scaled(lexicals, fusion.scale)
    for version, key in keys.items():
        feature = features.get(version)
        d, lex = cosines[version], lexicals[version]
        if lex <= 0.0 and d < MIN_DENSE_SIMILARITY:
            continue
        score = (
            fusion.dense_weight * dense_scaled[version]
            + fusion.lexical_weight * lexical_scaled[version]
        )
        if feature is not None:
            if stages.dense_context:
                score += DENSE_WEIGHT * DENSE_CONTEXT_WEIGHT * max(feature.dense_context, 0.0)
            if stages.entities and feature.subject_mentioned:
                score += fusion.entity_bonus
        if key not in best or score > best[key][2]:
            best[key] = (d, lex, score)
    return best


def filters_need_more(filters: Filters) -> bool:
    """Filters applied only after the re-read (conflict handling) may drop many candidates."""
    return filters.conflict_handling != ConflictHandling.INCLUDE


def _normal_path(path: str) -> str:
    path = path.strip().replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.strip("/")


def binding_boost(fact: Fact, filters: Filters) -> float:
    """Multiplier for a fact bound to the caller's repository, branch, or a path at or above
    the caller's code path. A fact bound to another repository gets no branch/path boost."""
    boost = 1.0
    same_repository = (
        not fact.repository or not filters.repository or fact.repository == filters.repository
    )
    if filters.repository and fact.repository == filters.repository:
        boost *= REPOSITORY_BOOST
    if filters.branch and fact.branch == filters.branch and same_repository:
        boost *= BRANCH_BOOST
    if filters.code_path and fact.code_path and same_repository:
        wanted, bound = _normal_path(filters.code_path), _normal_path(fact.code_path)
        if bound and (wanted == bound or wanted.startswith(bound + "/")):
            boost *= CODE_PATH_BOOST
    return boost


def passes_filters(fact: Fact, filters: Filters) -> bool:
    if filters.document_type and fact.document_type != filters.document_type:
        return False
    if filters.source_type and fact.source_type != filters.source_type:
        return False
    if filters.include_predicates and fact.predicate not in filters.include_predicates:
        return False
    if fact.predicate in filters.exclude_predicates:
        return False
    if filters.min_authority is not None and fact.authority < filters.min_authority:
        return False
    return filters.max_trust_tier is None or fact.trust_tier <= filters.max_trust_tier


def find_conflicts(results: Sequence[Result]) -> list[Conflict]:
    groups: dict[tuple[str, str], dict[str, None]] = {}
    for result in results:
        fact = result.fact
        if not fact.conflicting_fact_keys:
            continue
        keys = groups.setdefault((fact.subject, fact.predicate), {})
        keys[fact.fact_key] = None
        for key in fact.conflicting_fact_keys:
            keys[key] = None
    return [
        Conflict(subject=subject, predicate=predicate, fact_keys=tuple(keys))
        for (subject, predicate), keys in groups.items()
    ]


def freshness_warnings(results: Sequence[Result]) -> list[FreshnessWarning]:
    """The cited sources knowledge marked stale, once per fact and source."""
    warnings: list[FreshnessWarning] = []
    seen: set[tuple[str, str]] = set()
    for result in results:
        for citation in result.fact.citations:
            if not citation.stale:
                continue
            key = (result.fact.fact_key, citation.source_id)
            if key in seen:
                continue
            seen.add(key)
            warnings.append(
                FreshnessWarning(
                    fact_key=result.fact.fact_key,
                    source_id=citation.source_id,
                    reason=citation.stale_reason or REASON_SOURCE_STALE,
                    observed_at=citation.observed_at,
                )
            )
    return warnings


def render(fact: Fact, *, compact: bool) -> str:
    """The text a result costs in a context window (what the token estimate counts)."""
    parts = [fact.subject, fact.predicate, fact.object]
    for citation in fact.citations:
        if compact:
            parts += [citation.source_id, citation.locator]
        else:
            parts += [
                citation.source_id,
                citation.locator,
                citation.title,
                citation.uri,
                citation.excerpt,
            ]
    return " ".join(part for part in parts if part)


def rerank_text(fact: Fact) -> str:
    """What a reranker reads of a fact (the text it was embedded as, index contract)."""
    return f"{fact.subject} {fact.predicate.replace('_', ' ')} {fact.object}"


def estimate_tokens(fact: Fact, *, compact: bool) -> int:
    return math.ceil(len(render(fact, compact=compact)) / CHARS_PER_TOKEN)


def compact_citations(fact: Fact) -> Fact:
    return replace(
        fact,
        citations=tuple(
            Citation(source_id=c.source_id, locator=c.locator, verification=c.verification)
            for c in fact.citations
        ),
    )


def _check_limit(limit: int) -> int:
    if limit == 0:
        return DEFAULT_LIMIT
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput("limit")
    return limit


def _check_query(query: str) -> str:
    if not query.strip() or len(query) > MAX_QUERY_CHARS:
        raise InvalidInput("query")
    return query


def _omissions(keys: Sequence[str], reason: str) -> list[Omission]:
    return [Omission(fact_key=key, reason=reason) for key in keys]


def _counted(leg: Any, found: Sequence[Candidate]) -> None:
    """A leg's span: how many candidates it found and the best raw score, never text."""
    leg.set_attribute(RESULTS, len(found))
    if found:
        leg.set_attribute(TOP_SCORE, max(c.score for c in found))


def _numbered(results: Sequence[Result]) -> list[Result]:
    return [replace(r, position=n) for n, r in enumerate(results, start=1)]


class Retriever:
    def __init__(
        self,
        embedder: Embedder,
        vectors: VectorIndex,
        index: SearchIndex,
        facts: FactSource,
        *,
        candidate_pool: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        reranker: Reranker | None = None,
        stages: Stages = Stages(),
        fusion: Fusion = Fusion(),
        assembler_version: str,
        learned: ActiveModels | None = None,
    ) -> None:
        """``assembler_version`` is the contract these parts order by (``pipeline/contract.py``
        derives it); every assembled context reports it, and snapshot replay checks it.
        ``learned``: the active learned ranking models (rank/lifecycle.py keeps them current);
        one that serves the request's scopes reorders the results and brings its own
        contract version."""
        self._embedder = embedder
        self._vectors = vectors
        self._index = index
        self._facts = facts
        self._pool = candidate_pool
        self._clock = clock
        self._reranker = reranker
        self.stages = stages
        self.fusion = fusion
        self.assembler_version = assembler_version
        self._learned = learned

    async def search(
        self,
        scope_ids: Sequence[str],
        query: str,
        limit: int,
        filters: Filters,
        *,
        learned: ActiveModels | None = None,
    ) -> SearchOutcome:
        """``learned``: the learned models to rank with instead of the active ones (a replay's,
        pinned by its contract version); the same for ``assemble``."""
        limit = _check_limit(limit)
        now = self._clock()
        ordering = await self._order(scope_ids, _check_query(query), filters, now, limit, learned)
        kept = _numbered(ordering.ordered[:limit])
        omitted = _omissions([r.fact.fact_key for r in ordering.ordered[limit:]], REASON_LIMIT)
        omitted += _omissions(ordering.unread, REASON_LIMIT)
        omitted += _omissions(ordering.conflict_omitted, REASON_CONFLICT_HANDLING)
        return SearchOutcome(
            results=kept,
            conflicts=find_conflicts(kept),
            freshness_warnings=freshness_warnings(kept),
            omitted=omitted[:OMITTED_CAP],
            empty_reason="" if kept else ordering.empty_reason,
            assembler_version=ordering.assembler_version,
            retrieval_mode=ordering.retrieval_mode,
        )

    async def assemble(
        self,
        scope_id: str,
        query: str,
        limit: int,
        token_budget: int,
        filters: Filters,
        *,
        compact: bool,
        learned: ActiveModels | None = None,
    ) -> ContextOutcome:
        if not scope_id:
            raise InvalidInput("scope_id")
        limit = _check_limit(limit)
        if token_budget == 0:
            token_budget = DEFAULT_TOKEN_BUDGET
        if not 1 <= token_budget <= MAX_TOKEN_BUDGET:
            raise InvalidInput("token_budget")
        now = self._clock()
        ordering = await self._order([scope_id], _check_query(query), filters, now, limit, learned)
        candidates = ordering.ordered[:limit]
        kept: list[Result] = []
        spent = 0
        for result in candidates:
            cost = estimate_tokens(result.fact, compact=compact)
            if spent + cost > token_budget:
                break
            spent += cost
            kept.append(result)
        over_budget = candidates[len(kept) :]
        omitted = _omissions([r.fact.fact_key for r in over_budget], REASON_TOKEN_BUDGET)
        omitted += _omissions([r.fact.fact_key for r in ordering.ordered[limit:]], REASON_LIMIT)
        omitted += _omissions(ordering.unread, REASON_LIMIT)
        omitted += _omissions(ordering.conflict_omitted, REASON_CONFLICT_HANDLING)
        kept = _numbered(kept)
        warnings = freshness_warnings(kept)
        if compact:
            kept = [replace(r, fact=compact_citations(r.fact)) for r in kept]
        if kept:
            empty_reason = ""
        elif candidates:
            empty_reason = EMPTY_TOKEN_BUDGET
        else:
            empty_reason = ordering.empty_reason
        return ContextOutcome(
            results=kept,
            conflicts=find_conflicts(kept),
            freshness_warnings=warnings,
            omitted=omitted[:OMITTED_CAP],
            empty_reason=empty_reason,
            token_estimate=spent,
            assembler_version=ordering.assembler_version,
            retrieval_mode=ordering.retrieval_mode,
        )

    async def candidates(self, scope_id: str, query: str) -> list[Result] | None:
        """What the learned ranking stage receives for a pack of ``scope_id`` asked
        ``query`` (the default limit, no filters): every re-read candidate in the hand-set
        order, before any model and any cut; None when the answer is degraded (no model
        serves one). The serving path a model is judged on (rank/lifecycle.py's Ranking)."""
        ordering = await self._order(
            [scope_id], _check_query(query), Filters(), self._clock(), DEFAULT_LIMIT, ActiveModels()
        )
        return ordering.ordered if ordering.retrieval_mode is RetrievalMode.HYBRID else None

    async def _order(
        self,
        scope_ids: Sequence[str],
        query: str,
        filters: Filters,
        now: datetime,
        limit: int,
        learned: ActiveModels | None,
    ) -> _Ordering:
        scopes = tuple(dict.fromkeys(s for s in scope_ids if s))
        if not scopes:
            raise InvalidInput("scope_ids")
        index_query = IndexQuery(
            scope_ids=scopes,
            as_of=filters.as_of or now,
            known_as_of=filters.known_as_of,
            document_type=filters.document_type,
            source_type=filters.source_type,
            include_predicates=filters.include_predicates,
            exclude_predicates=filters.exclude_predicates,
            min_authority=filters.min_authority,
            max_trust_tier=filters.max_trust_tier,
        )

        (vector, dense, mode), lexical = await asyncio.gather(
            self._dense_leg(query, index_query),
            self._lexical_leg(query, index_query),
        )
        versions = list(dict.fromkeys(c.version_id for c in [*dense, *lexical]))
        with span("retrieval features", **{STAGE: "features", CANDIDATES: len(versions)}):
            features = await self._index.features(scopes, versions, vector, query, index_query)
        fused = fuse(dense, lexical, features, self.stages, self.fusion)
        keys = sorted(fused, key=lambda k: (-fused[k][2], k))
        # Re-read a short list: what can make the limit after filters, not every candidate.
        unread: list[str] = []
        if not filters_need_more(filters):
            cut = max(REREAD_MIN, 2 * limit)
            keys, unread = keys[:cut], keys[cut:]
        facts = []
        if keys:
            with span("retrieval reread", **{STAGE: "reread", CANDIDATES: len(keys)}) as read:
                facts = await self._facts.batch_get_facts(
                    scopes, keys, filters.as_of, filters.known_as_of)
                read.set_attribute(RESULTS, len(facts))
        # Defence in depth: knowledge already re-checks scopes; so do we.
        authoritative = {
            f.fact_key: f
            for f in facts
            if f.fact_key in fused and f.scope_id in scopes and f.state in index_query.states
        }

        timed: set[str] = set()
        if self.fusion.time_bonus and authoritative and asks_when(query):
            timed = {key for key, reread in authoritative.items() if says_when(reread.object)}
            for key in timed:
                d, lex, score = fused[key]
                fused[key] = (d, lex, score + self.fusion.time_bonus)
            keys.sort(key=lambda k: (-fused[k][2], k))

        # Rerank a short list of the re-read facts (the reranker bounds it); they stay above
        # the rest, which keep their fused order.
        reranked: dict[str, float] = {}
        if self._reranker is not None and self.stages.rerank and authoritative:
            texts = {k: rerank_text(authoritative[k]) for k in keys if k in authoritative}
            with span("retrieval rerank", **{STAGE: "rerank", CANDIDATES: len(texts)}) as rank:
                reranked = await self._reranker.rerank(query, list(texts), fused, texts)
                rank.set_attribute(RESULTS, len(reranked))
                if reranked:
                    rank.set_attribute(TOP_SCORE, max(reranked.values()))

        ordering = _Ordering(
            unread=unread, retrieval_mode=mode, assembler_version=self.assembler_version
        )
        filtered_out = 0
        for key in keys:
            fact = authoritative.get(key)
            if fact is None:
                continue
            if not passes_filters(fact, filters):
                filtered_out += 1
                continue
            handling = filters.conflict_handling
            if (handling == ConflictHandling.EXCLUDE and fact.disputed) or (
                handling == ConflictHandling.ONLY and not fact.disputed
            ):
                ordering.conflict_omitted.append(key)
                continue
            dense_score, lexical_score, fused_score = fused[key]
            boost = binding_boost(fact, filters)
            rerank_score = reranked.get(key)
            final = (fused_score if rerank_score is None else rerank_score) * boost
            extra = {} if rerank_score is None else {"rerank": rerank_score}
            feature = features.get(fact.version_id)
            ordering.ordered.append(
                Result(
                    fact=fact,
                    score=final,
                    position=0,
                    result_ref=fact.version_id,
                    signals={
                        "dense": dense_score,
                        "lexical": lexical_score,
                        "fused": fused_score,
                        "boost": boost,
                        "trust_tier": float(fact.trust_tier),
                        "authority": fact.authority,
                        "final": final,
                        # The rest of the vector a learned ranking model reads.
                        "dense_context": feature.dense_context if feature else 0.0,
                        "entity": 1.0 if feature and feature.subject_mentioned else 0.0,
                        "time": 1.0 if key in timed else 0.0,
                        "stale": 1.0 if any(c.stale for c in fact.citations) else 0.0,
                        **extra,
                    },
                )
            )
        ordering.ordered.sort(
            key=lambda r: (
                "rerank" not in r.signals,
                -r.score,
                r.fact.trust_tier,
                -r.fact.authority,
                r.fact.fact_key,
            )
        )
        ordering.ordered = [
            replace(r, signals={**r.signals, "hand_rank": float(position)})
            for position, r in enumerate(ordering.ordered, start=1)
        ]
        models = learned if learned is not None else self._learned
        served = models.select(scopes) if models is not None else None
        if ordering.retrieval_mode is not RetrievalMode.HYBRID:
            served = None  # a model fitted on hybrid signals would misread a degraded answer
        if served is not None:
            # Reorders what was found here and nothing else (learned_rank.reorder).
            ordering.ordered = learned_rank.reorder(ordering.ordered, served.ranker)
            ordering.assembler_version = served.assembler_version
        with span("retrieval order", **{STAGE: "order", CANDIDATES: len(keys)}) as ordered:
            ordered.set_attribute(RESULTS, len(ordering.ordered))
            ordered.set_attribute("vera.retrieval.filtered_out", filtered_out)
            ordered.set_attribute("vera.retrieval.learned", served is not None)
            if ordering.ordered:
                ordered.set_attribute(TOP_SCORE, ordering.ordered[0].score)
        if not ordering.ordered:
            if filtered_out or ordering.conflict_omitted:
                ordering.empty_reason = EMPTY_FILTERED_OUT
            else:
                ordering.empty_reason = await self._why_nothing(index_query)
        return ordering

    async def _lexical_leg(self, query: str, index_query: IndexQuery) -> list[Candidate]:
        with span("retrieval lexical", **{STAGE: "lexical"}) as leg:
            found = await self._index.search(query, index_query, self._pool)
            _counted(leg, found)
            return found

    async def _dense_leg(
        self, query: str, index_query: IndexQuery
    ) -> tuple[list[float], list[Candidate], RetrievalMode]:
        with span("retrieval dense", **{STAGE: "dense"}) as leg:
            vector, found, mode = await self._dense_candidates(query, index_query)
            _counted(leg, found)
            leg.set_attribute("vera.retrieval.mode", mode.value)
            return vector, found, mode

    async def _dense_candidates(
        self, query: str, index_query: IndexQuery
    ) -> tuple[list[float], list[Candidate], RetrievalMode]:
        """The query's vector and the dense candidates. Any failure here (a model error, a
        Qdrant server down, a closed shard) degrades the answer to the lexical leg rather
        than failing it: with no vector the query is the zero vector (no dense evidence,
        while the features still see entity mentions); with a vector but no index, the
        features still score the lexical candidates' exact cosine from memory."""
        try:
            vector = list((await self._embedder.embed([query]))[0])
        except Exception as exc:
            log.warning("query embedding failed (%s); answering lexically", type(exc).__name__)
            return [0.0] * self._embedder.dimensions, [], RetrievalMode.LEXICAL_ONLY
        try:
            dense = await self._vectors.search(vector, index_query, self._pool)
        except Exception as exc:
            log.warning("vector index failed (%s); answering lexically", type(exc).__name__)
            return vector, [], RetrievalMode.LEXICAL_ONLY
        return vector, dense, RetrievalMode.HYBRID

    async def _why_nothing(self, query: IndexQuery) -> str:
        if not await self._index.has_documents(query, with_attributes=False):
            return EMPTY_NO_FACTS_IN_SCOPE
        if query.has_attribute_filters and not await self._index.has_documents(
            query, with_attributes=True
        ):
            return EMPTY_FILTERED_OUT
        return EMPTY_NO_MATCH
