"""An in-process, rebuildable view of the indexed fact versions, per scope: the BM25 lexical
leg (the fact's own text plus its neighbours in the same source as a second field), the
stored vectors (for exact dense scores of every candidate and a neighbourhood vector), and
the subjects in scope (for entity mentions in a query).

It is filled by the change-log tailer and, on start, from ``retrieval.documents``; nothing
here is authoritative. All calls are synchronous and fast; the adapter in lexical_memory
runs them on one worker thread so the event loop never waits on the arithmetic.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from vera.services.retrieval import text as textmod
from vera.services.retrieval.model import Candidate, Fact, FactState, IndexQuery
from vera.services.retrieval.pipeline import CandidateFeatures

K1 = 1.2
B = 0.75
# Neighbours on each side of a fact in its source's order form its context field.
CONTEXT_WINDOW = 2
# A term in more than this share of a scope's facts only adds to facts that rarer query
# terms already matched: it costs the most and separates the least (the candidate cap).
COMMON_TERM_SHARE = 0.5
COMMON_TERM_MIN_FACTS = 1000
SINCE_ALWAYS = -1.0e15
FOREVER = 1.0e15
_DIGITS = re.compile(r"(\d+)")


def order_key(locator: str) -> tuple:
    """Natural order of locators within a source ("D1:9" < "D1:10", "L2" < "L10")."""
    parts = _DIGITS.split(locator)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts if p)


def fact_text(fact: Fact) -> str:
    """What the lexical leg indexes: the statement and its evidence excerpts."""
    parts = [fact.subject, fact.predicate.replace("_", " "), fact.object]
    parts += [c.excerpt for c in fact.citations if c.excerpt]
    return " ".join(p for p in parts if p)


def _epoch(value: datetime | None, default: float) -> float:
    return value.timestamp() if value is not None else default


@dataclass
class _Attrs:
    version_id: str
    fact_key: str
    predicate: str
    document_type: str
    source_type: str
    authority: float
    trust_tier: int
    subject_key: str
    source_id: str


@dataclass
class _Postings:
    slots: list[int] = field(default_factory=list)
    tfs: list[int] = field(default_factory=list)
    arrays: tuple[np.ndarray, np.ndarray] | None = None

    def get(self) -> tuple[np.ndarray, np.ndarray]:
        if self.arrays is None or len(self.arrays[0]) != len(self.slots):
            self.arrays = (np.asarray(self.slots, np.int64), np.asarray(self.tfs, np.float64))
        return self.arrays


class _Scope:
    """One scope's facts in slots; arrays grow by doubling."""

    def __init__(self, dimensions: int) -> None:
        self.dim = dimensions
        self.n = 0
        cap = 64
        self.length = np.zeros(cap, np.float64)
        self.state = np.zeros(cap, np.int8)
        self.times = np.zeros((cap, 4), np.float64)  # valid_from, valid_to, recorded, superseded
        self.vectors = np.zeros((cap, dimensions), np.float16)
        self.nb = np.full((cap, 2 * CONTEXT_WINDOW), -1, np.int64)
        self.ctx_length = np.zeros(cap, np.float64)
        self.attrs: list[_Attrs] = []
        self.slot_of: dict[str, int] = {}
        self.by_key: dict[str, list[int]] = {}
        self.postings: dict[str, _Postings] = {}
        self.sources: dict[str, list[tuple[tuple, int, int]]] = {}  # (order, position, slot)
        self.subjects: dict[str, int] = {}
        self.total_length = 0.0
        self.total_ctx_length = 0.0
        # Every sourced slot in source order, with its source's number (for neighbours
        # over a visible subset); rebuilt lazily after an insert.
        self._layout: tuple[np.ndarray, np.ndarray] | None = None

    def _grow(self) -> None:
        cap = len(self.length) * 2
        for name in ("length", "state", "ctx_length"):
            old = getattr(self, name)
            new = np.zeros(cap, old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)
        for name, fill in (("times", 0.0), ("vectors", 0.0), ("nb", -1)):
            old = getattr(self, name)
            new = np.full((cap, *old.shape[1:]), fill, old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def upsert(self, fact: Fact, vector: Sequence[float] | None, position: int) -> None:
        slot = self.slot_of.get(fact.version_id)
        if slot is None:
            if self.n == len(self.length):
                self._grow()
            slot = self.n
            self.n += 1
            self.slot_of[fact.version_id] = slot
            self.by_key.setdefault(fact.fact_key, []).append(slot)
            counts: dict[str, int] = {}
            for term in textmod.terms(fact_text(fact)):
                counts[term] = counts.get(term, 0) + 1
            for term, tf in counts.items():
                postings = self.postings.setdefault(term, _Postings())
                postings.slots.append(slot)
                postings.tfs.append(tf)
            self.length[slot] = float(sum(counts.values()))
            self.total_length += self.length[slot]
            citation = fact.citations[0] if fact.citations else None
            source_id = citation.source_id if citation else ""
            subject = textmod.name_key(fact.subject)
            self.attrs.append(
                _Attrs(
                    fact.version_id,
                    fact.fact_key,
                    fact.predicate,
                    fact.document_type,
                    fact.source_type,
                    fact.authority,
                    fact.trust_tier,
                    subject,
                    source_id,
                )
            )
            if subject:
                self.subjects[subject] = self.subjects.get(subject, 0) + 1
            if citation is not None and source_id:
                members = self.sources.setdefault(source_id, [])
                bisect.insort(members, (order_key(citation.locator), position, slot))
                self._link(members)
                self._layout = None
        else:
            attrs = self.attrs[slot]
            attrs.document_type, attrs.source_type = fact.document_type, fact.source_type
            attrs.authority, attrs.trust_tier = fact.authority, fact.trust_tier
        self.state[slot] = int(fact.state)
        self.times[slot] = (
            _epoch(fact.valid_from, SINCE_ALWAYS),
            _epoch(fact.valid_to, FOREVER),
            _epoch(fact.recorded_at, SINCE_ALWAYS),
            _epoch(fact.superseded_at, FOREVER),
        )
        if vector is not None:
            self.vectors[slot] = np.asarray(vector, np.float32)
        if fact.superseded_at is None and fact.recorded_at is not None:
            recorded = fact.recorded_at.timestamp()
            for other in self.by_key.get(fact.fact_key, ()):
                if (
                    other != slot
                    and self.times[other, 3] >= FOREVER
                    and self.times[other, 2] < recorded
                ):
                    self.times[other, 3] = recorded
                    self.state[other] = int(FactState.SUPERSEDED)

    def _link(self, members: list[tuple[tuple, int, int]]) -> None:
        """Recomputes the neighbours (and context lengths) of one source's facts."""
        slots = [slot for _, _, slot in members]
        for index, slot in enumerate(slots):
            row = [
                slots[j]
                for j in range(index - CONTEXT_WINDOW, index + CONTEXT_WINDOW + 1)
                if j != index and 0 <= j < len(slots)
            ]
            row += [-1] * (2 * CONTEXT_WINDOW - len(row))
            self.nb[slot] = row
            self.total_ctx_length -= self.ctx_length[slot]
            self.ctx_length[slot] = sum(self.length[s] for s in row if s >= 0)
            self.total_ctx_length += self.ctx_length[slot]

    def allowed(self, query: IndexQuery) -> np.ndarray:
        """State and time filters over every slot (attributes are checked per candidate)."""
        n = self.n
        times = self.times[:n]
        mask = np.isin(self.state[:n], [int(s) for s in query.states])
        as_of = query.as_of.timestamp()
        mask &= (times[:, 0] <= as_of) & (times[:, 1] > as_of)
        if query.known_as_of is not None:
            known = query.known_as_of.timestamp()
            mask &= (times[:, 2] <= known) & (times[:, 3] > known)
        return mask

    def neighbours(self, visible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(neighbour slots, context lengths) as if only the ``visible`` slots existed: each
        visible fact's CONTEXT_WINDOW visible neighbours on each side in its source."""
        n = self.n
        if self._layout is None:
            slots: list[int] = []
            source_numbers: list[int] = []
            for number, members in enumerate(self.sources.values()):
                slots += [slot for _, _, slot in members]
                source_numbers += [number] * len(members)
            self._layout = (np.asarray(slots, np.int64), np.asarray(source_numbers, np.int64))
        ordered, groups = self._layout
        keep = visible[ordered]
        shown, shown_groups = ordered[keep], groups[keep]
        m = len(shown)
        nb = np.full((n, 2 * CONTEXT_WINDOW), -1, np.int64)
        column = 0
        for offset in range(-CONTEXT_WINDOW, CONTEXT_WINDOW + 1):
            if offset == 0:
                continue
            index = np.arange(m) + offset
            ok = (index >= 0) & (index < m)
            ok[ok] = shown_groups[index[ok]] == shown_groups[ok]
            nb[shown[ok], column] = shown[index[ok]]
            column += 1
        lengths = np.where(nb >= 0, self.length[np.maximum(nb, 0)], 0.0).sum(axis=1)
        return nb, lengths

    def bm25(
        self, query_terms: Iterable[str], *, context: bool, visible: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(own-field, context-field) BM25 of every slot.

        With ``visible`` (a snapshot's boundaries), every corpus statistic (n, df, average
        lengths, neighbours) counts only the visible slots, so writes outside them never
        change a score; without it, the statistics cover every indexed version (cheaper)."""
        n = self.n
        own = np.zeros(n)
        ctx = np.zeros(n)
        if n == 0:
            return own, ctx
        if visible is None:
            count = n
            avg = (self.total_length / n) or 1.0
            avg_ctx = (self.total_ctx_length / n) or 1.0
            nb, ctx_length = self.nb[:n], self.ctx_length[:n]
        else:
            count = int(np.count_nonzero(visible))
            if count == 0:
                return own, ctx
            nb, ctx_length = self.neighbours(visible)
            avg = (float(self.length[:n][visible].sum()) / count) or 1.0
            avg_ctx = (float(ctx_length[visible].sum()) / count) or 1.0
        found = [(t, self.postings[t]) for t in set(query_terms) if t in self.postings]
        df_of = {
            t: len(p.slots) if visible is None else int(np.count_nonzero(visible[p.get()[0]]))
            for t, p in found
        }
        found = [(t, p) for t, p in found if df_of[t] > 0]
        common_cut = COMMON_TERM_SHARE * count if count >= COMMON_TERM_MIN_FACTS else math.inf
        rare = [(t, p) for t, p in found if df_of[t] <= common_cut]
        common = [(t, p) for t, p in found if df_of[t] > common_cut]
        # Sparse updates: a term touches its postings and their neighbours, never all n
        # slots (at 100k facts, whole-array passes per term were most of the leg's time).
        for group in (rare, common):
            restrict = own > 0 if group is common and rare else None
            for _, postings in group:
                slots, tfs = postings.get()
                if visible is not None:
                    shown = visible[slots]
                    slots, tfs = slots[shown], tfs[shown]
                df = len(slots)
                idf = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
                norm = K1 * (1.0 - B + B * self.length[slots] / avg)
                add = idf * tfs * (K1 + 1.0) / (tfs + norm)
                if restrict is not None:
                    add *= restrict[slots]
                own[slots] += add  # a postings list holds each slot once
                if not context:
                    continue
                targets = nb[slots]
                valid = targets >= 0
                hit, ctx_tf = _sum_by_slot(
                    targets[valid], np.repeat(tfs, targets.shape[1])[valid.ravel()], n
                )
                df_ctx = len(hit)
                if df_ctx == 0:
                    continue
                idf_ctx = math.log(1.0 + (count - df_ctx + 0.5) / (df_ctx + 0.5))
                cnorm = K1 * (1.0 - B + B * ctx_length[hit] / avg_ctx)
                cadd = idf_ctx * ctx_tf * (K1 + 1.0) / (ctx_tf + cnorm)
                if restrict is not None:
                    cadd *= restrict[hit] | (ctx[hit] > 0)
                ctx[hit] += cadd
        return own, ctx

    def passes(self, slot: int, query: IndexQuery) -> bool:
        a = self.attrs[slot]
        if query.document_type and a.document_type != query.document_type:
            return False
        if query.source_type and a.source_type != query.source_type:
            return False
        if query.include_predicates and a.predicate not in query.include_predicates:
            return False
        if a.predicate in query.exclude_predicates:
            return False
        if query.min_authority is not None and a.authority < query.min_authority:
            return False
        return query.max_trust_tier is None or a.trust_tier <= query.max_trust_tier


def _sum_by_slot(slots: np.ndarray, weights: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(distinct slots ascending, summed weight of each): sorting when there are few,
    counting over all ``n`` slots when there are many."""
    if len(slots) * 16 < n:
        distinct, inverse = np.unique(slots, return_inverse=True)
        return distinct, np.bincount(inverse, weights=weights)
    summed = np.bincount(slots, weights=weights, minlength=n)[:n]
    distinct = np.flatnonzero(summed)
    return distinct, summed[distinct]


class FactMemory:
    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self._scopes: dict[str, _Scope] = {}
        self._position = 0

    def __len__(self) -> int:
        return sum(s.n for s in self._scopes.values())

    def upsert(
        self, facts: Sequence[Fact], vectors: Sequence[Sequence[float]] | None, position: int
    ) -> None:
        for index, fact in enumerate(facts):
            scope = self._scopes.get(fact.scope_id)
            if scope is None:
                scope = self._scopes[fact.scope_id] = _Scope(self.dimensions)
            vector = vectors[index] if vectors is not None else None
            scope.upsert(fact, vector, position * 100_000 + index)

    def search(
        self, query_text: str, query: IndexQuery, limit: int, *, context_weight: float
    ) -> list[Candidate]:
        """BM25 of the own field plus ``context_weight`` times the context field."""
        query_terms = textmod.terms(query_text)
        hits: list[tuple[float, str, str]] = []
        for scope_id in query.scope_ids:
            scope = self._scopes.get(scope_id)
            if scope is None or scope.n == 0 or not query_terms:
                continue
            allowed = scope.allowed(query)
            # A snapshot replay (known_as_of) scores against exactly its visible facts.
            own, ctx = scope.bm25(
                query_terms,
                context=context_weight > 0,
                visible=allowed if query.known_as_of is not None else None,
            )
            score = own + context_weight * ctx
            score[~allowed] = 0.0
            nonzero = np.flatnonzero(score > 0)
            if len(nonzero) > 4 * limit:
                nonzero = nonzero[np.argpartition(-score[nonzero], 4 * limit)[: 4 * limit]]
            taken = 0
            for slot in nonzero[np.argsort(-score[nonzero], kind="stable")]:
                if not scope.passes(int(slot), query):
                    continue
                a = scope.attrs[slot]
                hits.append((float(score[slot]), a.fact_key, a.version_id))
                taken += 1
                if taken >= limit:
                    break
        hits.sort(key=lambda h: (-h[0], h[2]))
        return [Candidate(fact_key=k, version_id=v, score=s) for s, k, v in hits[:limit]]

    def features(
        self,
        scope_ids: Sequence[str],
        version_ids: Iterable[str],
        vector: Sequence[float],
        query_text: str,
        query: IndexQuery | None = None,
    ) -> dict[str, CandidateFeatures]:
        """Exact dense cosine, neighbourhood cosine and subject mention per known version.

        For a snapshot replay (``query.known_as_of`` set) the neighbourhood is the visible
        one, as in ``search``."""
        q = np.asarray(vector, np.float32)
        mentioned = textmod.mentioned_names(query_text)
        wanted = set(version_ids)
        out: dict[str, CandidateFeatures] = {}
        for scope_id in scope_ids:
            scope = self._scopes.get(scope_id)
            if scope is None:
                continue
            slots = [scope.slot_of[v] for v in wanted if v in scope.slot_of]
            if not slots:
                continue
            own = scope.vectors[slots].astype(np.float32) @ q
            if query is not None and query.known_as_of is not None:
                nb = scope.neighbours(scope.allowed(query))[0][slots]
            else:
                nb = scope.nb[slots]
            neighbour_vectors = scope.vectors[np.maximum(nb, 0)].astype(np.float32)
            neighbour_vectors *= (nb >= 0)[..., None]
            summed = neighbour_vectors.sum(axis=1)
            norms = np.linalg.norm(summed, axis=1)
            context = np.where(norms > 0, (summed @ q) / np.maximum(norms, 1e-9), 0.0)
            for index, slot in enumerate(slots):
                a = scope.attrs[slot]
                out[a.version_id] = CandidateFeatures(
                    dense=float(own[index]),
                    dense_context=float(context[index]),
                    subject_mentioned=bool(a.subject_key) and a.subject_key in mentioned,
                )
        return out

    def drop_scopes_holding(self, version_ids: Iterable[str]) -> list[str]:
        """Forgets every scope that holds one of the versions (erasure); returns their ids
        so the caller can reload what stays in them."""
        wanted = set(version_ids)
        dropped = [s for s, scope in self._scopes.items() if wanted & scope.slot_of.keys()]
        for scope_id in dropped:
            del self._scopes[scope_id]
        return dropped

    def has_subjects_in(self, scope_ids: Sequence[str], query_text: str) -> bool:
        mentioned = textmod.mentioned_names(query_text)
        return any(
            name in self._scopes[s].subjects
            for s in scope_ids
            if s in self._scopes
            for name in mentioned
        )
