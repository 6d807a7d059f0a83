"""Okapi BM25 (k1 1.2, b 0.75) with English stopwords and Snowball English stemming.

The strongest simple lexical baseline: lowercase word tokens, stopwords dropped, each
token stemmed, idf = ln(1 + (N - df + 0.5) / (df + 0.5)) (never negative).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from vera.services.retrieval.memory.text import terms

K1 = 1.2
B = 0.75

# The same terms as VERA's lexical leg, so the baseline and the product tokenize alike:
# lowercase words (an inner apostrophe kept), stopwords out, possessive dropped, Snowball.
tokenize = terms


class BM25:
    """An in-memory Okapi BM25 index over a fixed list of documents."""

    def __init__(self, documents: Sequence[str], *, k1: float = K1, b: float = B) -> None:
        self.k1 = k1
        self.b = b
        self._tfs = [Counter(tokenize(doc)) for doc in documents]
        self._lengths = [sum(tf.values()) for tf in self._tfs]
        count = len(documents)
        self._avgdl = (sum(self._lengths) / count) if count else 0.0
        df: Counter[str] = Counter()
        for tf in self._tfs:
            df.update(tf.keys())
        self._idf = {t: math.log(1.0 + (count - n + 0.5) / (n + 0.5)) for t, n in df.items()}
        self._postings: dict[str, list[int]] = {}
        for index, tf in enumerate(self._tfs):
            for term in tf:
                self._postings.setdefault(term, []).append(index)

    def __len__(self) -> int:
        return len(self._tfs)

    def scores(self, query: str) -> dict[int, float]:
        """Document index -> score, for documents sharing at least one query term."""
        out: dict[int, float] = {}
        avgdl = self._avgdl or 1.0
        for term in set(tokenize(query)):
            idf = self._idf.get(term)
            if idf is None:
                continue
            for index in self._postings[term]:
                tf = self._tfs[index][term]
                norm = self.k1 * (1.0 - self.b + self.b * self._lengths[index] / avgdl)
                out[index] = out.get(index, 0.0) + idf * tf * (self.k1 + 1.0) / (tf + norm)
        return out

    def search(self, query: str, limit: int = 10) -> list[tuple[int, float]]:
        """Top ``limit`` (document index, score), best first; ties by document order."""
        ranked = sorted(self.scores(query).items(), key=lambda item: (-item[1], item[0]))
        return ranked[:limit]
