"""An in-process, rebuildable view of the indexed fact versions, per scope: the BM25 lexical
leg (the fact's own text plus its neighbours in the same source as a second field), the
stored vectors (for exact dense scores of every candidate and a neighbourhood vector), and
the subjects in scope (for entity mentions in a query).

It is filled by the change-log tailer and, on start, from ``retrieval.documents``; nothing
here is authoritative. All calls are synchronous and fast; documents/index.py runs them on
one worker thread (worker.py) so the event loop never waits on the arithmetic.
"""

from __future__ import annotations

import bisect
import math
import re
from array import array
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from functools import partial
from itertools import chain
from types import MappingProxyType

import numpy as np

from vera.services.retrieval.domain import Candidate, CandidateFeatures, Fact, FactState, IndexQuery
from vera.services.retrieval.memory import text as textmod
from vera.services.retrieval.memory.columns import (
    SOURCE_DTYPE,
    Growable,
    Names,
    Postings,
    TermWeights,
    Weights,
    best_slots,
    bounds,
    concatenated,
    max_or,
    min_or,
    neighbour_tfs,
    writable,
)

K1 = 1.2
B = 0.75
# Neighbours on each side of a fact in its source's order form its context field, which
# a search weighs at CONTEXT_WEIGHT next to the fact's own text.
CONTEXT_WINDOW = 2
CONTEXT_WEIGHT = 0.7
# A term in more than this share of a scope's facts only adds to facts that rarer query
# terms already matched: it costs the most and separates the least (the candidate cap).
COMMON_TERM_SHARE = 0.5
COMMON_TERM_MIN_FACTS = 1000
_MISSING_SLOT = -1  # no neighbour there, no older version
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


class _Scope:
    """One scope's facts in slots: per-slot columns in numpy arrays that grow by doubling
    (untouched capacity is never written, so it takes no resident memory), the version
    and key strings once each, and categorical attributes interned."""

    def __init__(self, dimensions: int) -> None:
        self.dim = dimensions
        self.n = 0
        cap = 64
        self.length = np.zeros(cap, np.float64)
        self.state = np.zeros(cap, np.int8)
        # Valid and transaction time, epoch seconds (SINCE_ALWAYS/FOREVER when open).
        self.valid_from = np.zeros(cap, np.float64)
        self.valid_to = np.zeros(cap, np.float64)
        self.recorded = np.zeros(cap, np.float64)
        self.superseded = np.zeros(cap, np.float64)
        self.vectors = np.zeros((cap, dimensions), np.float16)
        self.nb = np.full((cap, 2 * CONTEXT_WINDOW), _MISSING_SLOT, np.int32)
        self.ctx_length = np.zeros(cap, np.float64)
        self.authority = np.zeros(cap, np.float64)
        self.trust_tier = np.zeros(cap, np.int32)
        # Interned codes of predicate, document type, source type and subject key.
        self.codes = np.zeros((cap, 4), np.int32)
        # Source order: locator (interned) and change-log position of each slot.
        self.locator = np.zeros(cap, np.int32)
        self.position = np.zeros(cap, np.int64)
        # The next older version of the same fact key.
        self.older = np.full(cap, _MISSING_SLOT, np.int32)
        self.names = Names()
        self.locators = Names()
        self._locator_order: list[tuple] = []  # order_key of each interned locator
        self.version_ids: list[str] = []
        self.fact_keys: list[str] = []
        self.slot_of: dict[str, int] = {}
        self.newest_of_key: dict[str, int] = {}
        self.postings: dict[str, Postings] = {}
        self.sources: dict[str, array[int]] = {}  # slots in source order
        self.subjects: dict[str, int] = {}
        self.total_length = 0.0
        self.total_ctx_length = 0.0
        # Every sourced slot in source order, with its source's number (for neighbours
        # over a visible subset); rebuilt lazily after an insert.
        self._layout: tuple[np.ndarray, np.ndarray] | None = None
        # Writes so far, and the last current read's filter (see allowed).
        self._written = 0
        self._live: tuple[int, tuple[int, ...], float, float, np.ndarray] | None = None
        self._weights: TermWeights | None = None  # current reads' term weights

    # The per-slot columns (slot on the first axis); those of slots start as _MISSING_SLOT.
    _COLUMNS = (
        "length", "state", "valid_from", "valid_to", "recorded", "superseded", "vectors",
        "ctx_length", "authority", "trust_tier", "codes", "locator", "position",
    )  # fmt: skip
    _SLOT_COLUMNS = ("nb", "older")

    def _grow(self) -> None:
        cap = max(64, len(self.length) * 2)
        for name in self._COLUMNS + self._SLOT_COLUMNS:
            old = getattr(self, name)
            shape = (cap, *old.shape[1:])
            if name in self._SLOT_COLUMNS:
                new = np.full(shape, _MISSING_SLOT, old.dtype)
            else:  # zeros from calloc: capacity not yet used takes no resident memory
                new = np.zeros(shape, old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    # Pickled (memory/snapshot_file.py) as the filled slots of each column, without the read
    # caches. Loaded, the columns are the pickle's own buffers (a copy into more capacity
    # would double the peak while the unpickler still holds them); the next insert grows.
    # The postings and sources travel as one array each with their lengths: thousands of
    # small arrays were half of a snapshot's pickling and loading.
    def __getstate__(self) -> dict:
        state = {**self.__dict__, "_layout": None, "_live": None, "_weights": None}
        for name in self._COLUMNS + self._SLOT_COLUMNS:
            state[name] = state[name][: self.n]
        postings = self.postings.values()
        state["postings"] = (
            list(self.postings),
            concatenated([p.slots.view() for p in postings], np.int32),
            concatenated([p.tfs.view() for p in postings], np.int32),
        )
        state["sources"] = (
            list(self.sources),
            concatenated([np.frombuffer(m, SOURCE_DTYPE) for m in self.sources.values()],
                          SOURCE_DTYPE),
        )
        return state

    def __setstate__(self, state: dict) -> None:
        for name in self._COLUMNS + self._SLOT_COLUMNS:
            state[name] = writable(state[name])
        terms, (lengths, slots), (_, tfs) = state["postings"]
        postings = state["postings"] = {}
        # Each term's own copy: views into one buffer would keep all of it alive while any
        # rare term never grows.
        for term, (start, end) in zip(terms, bounds(lengths), strict=True):
            entry = postings[term] = Postings.__new__(Postings)
            entry.slots = Growable.of(slots[start:end].copy())
            entry.tfs = Growable.of(tfs[start:end].copy())
        sources, (lengths, members) = state["sources"]
        state["sources"] = {
            source: array("i", members[start:end].tobytes())
            for source, (start, end) in zip(sources, bounds(lengths), strict=True)
        }
        self.__dict__.update(state)

    def _source_order(self, slot: int) -> tuple[tuple, int, int]:
        return self._locator_order[self.locator[slot]], int(self.position[slot]), slot

    def upsert(self, fact: Fact, vector: Sequence[float] | None, position: int) -> None:
        self._written += 1
        self._weights = None
        slot = self.slot_of.get(fact.version_id)
        if slot is None:
            if self.n == len(self.length):
                self._grow()
            slot = self.n
            self.n += 1
            self.slot_of[fact.version_id] = slot
            self.version_ids.append(fact.version_id)
            self.fact_keys.append(fact.fact_key)
            self.older[slot] = self.newest_of_key.get(fact.fact_key, _MISSING_SLOT)
            self.newest_of_key[fact.fact_key] = slot
            counts: dict[str, int] = {}
            for term in textmod.terms(fact_text(fact)):
                counts[term] = counts.get(term, 0) + 1
            for term, tf in counts.items():
                postings = self.postings.get(term)
                if postings is None:
                    postings = self.postings[term] = Postings()
                postings.add(slot, tf)
            self.length[slot] = float(sum(counts.values()))
            self.total_length += self.length[slot]
            citation = fact.citations[0] if fact.citations else None
            source_id = citation.source_id if citation else ""
            subject = textmod.name_key(fact.subject)
            names = self.names
            self.codes[slot, 0] = names.code(fact.predicate)
            self.codes[slot, 3] = names.code(subject)
            if subject:
                self.subjects[subject] = self.subjects.get(subject, 0) + 1
            if citation is not None and source_id:
                locator = self.locators.code(citation.locator)
                if locator == len(self._locator_order):
                    self._locator_order.append(order_key(citation.locator))
                self.locator[slot] = locator
                self.position[slot] = position
                members = self.sources.get(source_id)
                if members is None:
                    members = self.sources[source_id] = array("i")
                index = bisect.bisect_right(
                    members, self._source_order(slot), key=self._source_order
                )
                members.insert(index, slot)
                self._link(members, index)
                self._layout = None
        self.codes[slot, 1] = self.names.code(fact.document_type)
        self.codes[slot, 2] = self.names.code(fact.source_type)
        self.authority[slot] = fact.authority
        self.trust_tier[slot] = fact.trust_tier
        self.state[slot] = int(fact.state)
        self.valid_from[slot] = _epoch(fact.valid_from, SINCE_ALWAYS)
        self.valid_to[slot] = _epoch(fact.valid_to, FOREVER)
        self.recorded[slot] = _epoch(fact.recorded_at, SINCE_ALWAYS)
        self.superseded[slot] = _epoch(fact.superseded_at, FOREVER)
        if vector is not None:
            self.vectors[slot] = np.asarray(vector, np.float32)
        if fact.superseded_at is None and fact.recorded_at is not None:
            recorded = fact.recorded_at.timestamp()
            other = int(self.newest_of_key[fact.fact_key])
            while other >= 0:
                if (
                    other != slot
                    and self.superseded[other] >= FOREVER
                    and self.recorded[other] < recorded
                ):
                    self.superseded[other] = recorded
                    self.state[other] = int(FactState.SUPERSEDED)
                other = int(self.older[other])

    def _link(self, members: array[int], inserted: int) -> None:
        """Recomputes the neighbours (and context lengths) of the facts of one source that
        an insert at ``inserted`` (its position in source order) gave new ones: those up to
        CONTEXT_WINDOW places away (a long source no longer costs its length per insert)."""
        # Their neighbours lie within twice the window; positions below count from ``start``.
        start = max(0, inserted - 2 * CONTEXT_WINDOW)
        slots = members[start : inserted + 2 * CONTEXT_WINDOW + 1].tolist()
        first = max(0, inserted - CONTEXT_WINDOW) - start
        last = min(len(members), inserted + CONTEXT_WINDOW + 1) - start
        for index in range(first, last):
            slot = slots[index]
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
        """State and time filters over every slot (attributes are checked per candidate).

        A current read's mask (read-only) is kept until the next write and reused while
        ``as_of`` stays between the same valid-time boundaries: each query's "now" moves
        on, but rarely past a fact's valid_from or valid_to."""
        n = self.n
        states = tuple(int(s) for s in query.states)
        as_of = query.as_of.timestamp()
        if query.known_as_of is None and self._live is not None:
            written, cached_states, low, high, mask = self._live
            if (written, cached_states) == (self._written, states) and low <= as_of < high:
                return mask
        valid_from, valid_to = self.valid_from[:n], self.valid_to[:n]
        started, ended = valid_from <= as_of, valid_to <= as_of
        mask = np.isin(self.state[:n], states)
        mask &= started & ~ended
        if query.known_as_of is not None:
            known = query.known_as_of.timestamp()
            mask &= (self.recorded[:n] <= known) & (self.superseded[:n] > known)
            return mask
        # The mask holds for every as_of in [low, high): no boundary lies in between.
        low = max(max_or(valid_from[started], -math.inf), max_or(valid_to[ended], -math.inf))
        high = min(min_or(valid_from[~started], math.inf), min_or(valid_to[~ended], math.inf))
        mask.flags.writeable = False
        self._live = (self._written, states, low, high, mask)
        return mask

    def neighbours(self, visible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(neighbour slots, context lengths) as if only the ``visible`` slots existed: each
        visible fact's CONTEXT_WINDOW visible neighbours on each side in its source."""
        n = self.n
        if self._layout is None:
            sizes = [len(members) for members in self.sources.values()]
            ordered = np.fromiter(chain.from_iterable(self.sources.values()), np.int64, sum(sizes))
            self._layout = (ordered, np.repeat(np.arange(len(sizes), dtype=np.int64), sizes))
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
        # In the query's order, not a set's: a set of strings iterates in an order that
        # changes with each process's hash seed, and the float sums with it (replicas
        # disagreed in the last bit, enough to flip ties).
        distinct = dict.fromkeys(query_terms)
        found = [(t, self.postings[t]) for t in distinct if t in self.postings]
        df_of = {
            t: len(p) if visible is None else int(np.count_nonzero(visible[p.get()[0]]))
            for t, p in found
        }
        found = [(t, p) for t, p in found if df_of[t] > 0]
        common_cut = COMMON_TERM_SHARE * count if count >= COMMON_TERM_MIN_FACTS else math.inf
        rare = [(t, p) for t, p in found if df_of[t] <= common_cut]
        common = [(t, p) for t, p in found if df_of[t] > common_cut]
        # A current read reuses each term's weights until the scope's next write: they
        # depend on the corpus statistics only, and the costly ones (a common term's
        # neighbour field) belong to the terms that come back query after query.
        if visible is None:
            if self._weights is None:
                self._weights = TermWeights(keep=True, facts=n)
            weights = self._weights
        else:
            weights = TermWeights(keep=False)  # this read's statistics only
        for group in (rare, common):
            restrict = own > 0 if group is common and rare else None
            for term, postings in group:
                slots, add, at, cadd = weights.of(
                    term, context, partial(
                        self._term_weights, postings, visible, count, avg, avg_ctx, nb,
                        ctx_length, context, weights,
                    ),
                )
                own[slots] += add if restrict is None else add * restrict[slots]
                if cadd is None:
                    continue
                if restrict is not None:
                    cadd = cadd * (restrict[at] | (ctx[at] > 0))
                ctx[at] += cadd
        return own, ctx

    def _term_weights(
        self,
        postings: Postings,
        visible: np.ndarray | None,
        count: int,
        avg: float,
        avg_ctx: float,
        nb: np.ndarray,
        ctx_length: np.ndarray,
        context: bool,
        weights: TermWeights,
        compact: bool,
    ) -> Weights:
        """(slots, own-field weight of each, slots its context field reaches, weight of
        each) of one term; no context part without ``context`` or neighbours. ``compact``
        (weights to keep) lists the reached slots even where a pass over every slot would
        be cheaper once: a kept pass over every slot holds 8 bytes a fact.

        Sparse: a term touches its postings and their neighbours, not all n slots (at 100k
        facts, whole-array passes per term were most of the leg's time), unless its
        neighbours reach a large share of them anyway (see neighbour_tfs)."""
        n = self.n
        slots, tfs = postings.get()
        if visible is not None:
            shown = visible[slots]
            slots, tfs = slots[shown], tfs[shown]
        df = len(slots)
        idf = math.log(1.0 + (count - df + 0.5) / (df + 0.5))
        norm = K1 * (1.0 - B + B * self.length.take(slots) / avg)
        add = idf * tfs * (K1 + 1.0) / (tfs + norm)
        if not context:
            return slots, add, None, None
        # take, not nb[slots]: numpy's fancy indexing of rows this narrow was ~10x slower
        hit, ctx_tf = neighbour_tfs(nb.take(slots, axis=0), tfs, n)
        df_ctx = len(ctx_tf) if hit is not None else int(np.count_nonzero(ctx_tf))
        if df_ctx == 0:
            return slots, add, None, None
        idf_ctx = math.log(1.0 + (count - df_ctx + 0.5) / (df_ctx + 0.5))
        at: slice | np.ndarray
        if hit is None and compact and 2 * df_ctx < n:  # kept: only the slots it reaches
            hit = np.flatnonzero(ctx_tf).astype(np.int32)
            ctx_tf = ctx_tf.take(hit)
        if hit is None:  # most slots: one without a hit adds exactly 0
            at = slice(None)
            cnorm = weights.every_context_norm(
                lambda: K1 * (1.0 - B + B * ctx_length / avg_ctx)
            )
        else:
            at = hit
            cnorm = K1 * (1.0 - B + B * ctx_length.take(hit) / avg_ctx)
        return slots, add, at, idf_ctx * ctx_tf * (K1 + 1.0) / (ctx_tf + cnorm)

    def passes(self, slot: int, query: IndexQuery) -> bool:
        names = self.names.names
        predicate, document_type, source_type, _ = self.codes[slot]
        if query.document_type and names[document_type] != query.document_type:
            return False
        if query.source_type and names[source_type] != query.source_type:
            return False
        if query.include_predicates and names[predicate] not in query.include_predicates:
            return False
        if names[predicate] in query.exclude_predicates:
            return False
        if query.min_authority is not None and self.authority[slot] < query.min_authority:
            return False
        return query.max_trust_tier is None or self.trust_tier[slot] <= query.max_trust_tier

    def subject_key(self, slot: int) -> str:
        return self.names.names[self.codes[slot, 3]]


class FactMemory:
    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self._scopes: dict[str, _Scope] = {}

    def __len__(self) -> int:
        return sum(s.n for s in self._scopes.values())

    @property
    def scopes(self) -> Mapping[str, _Scope]:
        """Each scope's index by scope id, read-only: what the benches measure."""
        return MappingProxyType(self._scopes)

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
                nonzero = best_slots(score, nonzero, 4 * limit)
            taken = 0
            for slot in nonzero[np.argsort(-score[nonzero], kind="stable")]:
                if not scope.passes(int(slot), query):
                    continue
                hits.append((float(score[slot]), scope.fact_keys[slot], scope.version_ids[slot]))
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
        wanted = dict.fromkeys(version_ids)  # ordered, as the terms in bm25
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
                subject = scope.subject_key(slot)
                out[scope.version_ids[slot]] = CandidateFeatures(
                    dense=float(own[index]),
                    dense_context=float(context[index]),
                    subject_mentioned=textmod.entity_mentioned(
                        subject, mentioned, scope.subjects),
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
