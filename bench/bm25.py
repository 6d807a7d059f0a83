"""Okapi BM25 (k1 1.2, b 0.75) with English stopwords and Snowball English stemming.

The strongest simple lexical baseline: lowercase word tokens, stopwords dropped, each
token stemmed, idf = ln(1 + (N - df + 0.5) / (df + 0.5)) (never negative).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import snowballstemmer

K1 = 1.2
B = 0.75

# The classic English stopword list (the ~175 words of the NLTK / Snowball English list).
STOPWORDS: frozenset[str] = frozenset("""
a about above after again against all am an and any are aren't as at be because been
before being below between both but by can't cannot could couldn't did didn't do does
doesn't doing don't down during each few for from further had hadn't has hasn't have
haven't having he he'd he'll he's her here here's hers herself him himself his how how's
i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most mustn't my
myself no nor not of off on once only or other ought our ours ourselves out over own same
shan't she she'd she'll she's should shouldn't so some such than that that's the their
theirs them themselves then there there's these they they'd they'll they're they've this
those through to too under until up very was wasn't we we'd we'll we're we've were
weren't what what's when when's where where's which while who who's whom why why's with
won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
""".split())

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STEMMER = snowballstemmer.stemmer("english")


def _normalize(text: str) -> str:
    return text.lower().replace("\u2019", "'").replace("\u2018", "'")


def tokenize(text: str) -> list[str]:
    """Lowercase words (an inner apostrophe kept), stopwords out, Snowball-stemmed."""
    words = [w for w in _WORD.findall(_normalize(text)) if w not in STOPWORDS]
    words = [w[:-2] if w.endswith("'s") else w for w in words]  # possessive: Caroline's
    return [w for w in _STEMMER.stemWords(words) if w and w not in STOPWORDS]


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
