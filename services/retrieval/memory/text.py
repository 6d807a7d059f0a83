"""Text normalization shared by the lexical index, entity matching and the time match.

BM25 terms: lowercase words (an inner apostrophe kept), the classic English stopword list
dropped, possessive 's dropped, Snowball English stems. Entity names: lowercase words
joined by one space, so "payments-api" and "Payments API" name the same thing.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Mapping

import snowballstemmer

STOPWORDS: frozenset[str] = frozenset(
    """
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
""".split()
)

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NAME_WORD = re.compile(r"[a-z0-9]+")
# A snowball stemmer keeps its working state on itself, so two threads sharing one
# corrupt each other's words (IndexError, wrong stems): one stemmer per thread.
_STEMMERS = threading.local()
MAX_NAME_WORDS = 4
# A corpus repeats a few thousand words (2.4k distinct in 10k generated facts): stemming
# every occurrence anew was most of refilling the memory at a replica's start.
STEM_CACHE_WORDS = 1 << 15
# Longer words (hashes, base64 runs in a query) are stemmed each time: a run of unique
# ones would otherwise push the corpus's vocabulary out of the cache.
STEM_CACHE_MAX_CHARS = 40


def _stemmer():
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = snowballstemmer.stemmer("english")
    return stemmer


@functools.lru_cache(maxsize=STEM_CACHE_WORDS)
def _cached_stem(word: str) -> str:
    return _stemmer().stemWord(word)


def _stem(word: str) -> str:
    return _cached_stem(word) if len(word) <= STEM_CACHE_MAX_CHARS else _stemmer().stemWord(word)


def _lower(text: str) -> str:
    return text.lower().replace("\u2019", "'").replace("\u2018", "'")


def terms(text: str) -> list[str]:
    """BM25 terms of ``text``, in order, repeats kept."""
    words = [w for w in _WORD.findall(_lower(text)) if w not in STOPWORDS]
    words = [w[:-2] if w.endswith("'s") else w for w in words]
    return [s for w in words if (s := _stem(w)) and s not in STOPWORDS]


def name_key(name: str) -> str:
    """An entity name as matching sees it ("" when it has no words)."""
    return " ".join(_NAME_WORD.findall(_lower(name)))


def mentioned_names(text: str) -> set[str]:
    """Every run of up to MAX_NAME_WORDS consecutive words of ``text``, as name keys."""
    words = _NAME_WORD.findall(_lower(text))
    found: set[str] = set()
    for start in range(len(words)):
        for size in range(1, MAX_NAME_WORDS + 1):
            if start + size > len(words):
                break
            found.add(" ".join(words[start : start + size]))
    return found


def entity_mentioned(subject: str, mentioned: set[str], subjects: Mapping[str, int]) -> bool:
    """Whether ``mentioned`` (from :func:`mentioned_names`) names the entity ``subject``
    (a name key) is about: the subject itself, or a word prefix of it that is itself some
    fact's subject. Subjects name parts of an entity after it ("payments api deploy
    pipeline", "itsdangerous signer"); a question naming the entity must not favour the
    facts whose subject is the bare name over those about its parts."""
    if not subject:
        return False
    if subject in mentioned:
        return True
    words = subject.split(" ")
    return any((prefix := " ".join(words[:size])) in mentioned and prefix in subjects
               for size in range(1, min(len(words), MAX_NAME_WORDS + 1)))


# A question about when (English, as the stopwords), and a text that says when: a date, a
# year, a month or weekday, or a time relative to when it was said ("last week", "3 days
# ago"). "May" counts only next to a number (otherwise it is mostly the verb).
_ASKS_WHEN = re.compile(r"\bwhen\b|\bwhat (?:year|month|day|date|time)\b|\bhow long ago\b")
_SAYS_WHEN = re.compile(
    r"\b(?:(?:19|20)\d\d|january|february|march|april|june|july|august|september|october"
    r"|november|december|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|yesterday|today|tonight|tomorrow|recently|ago"
    r"|(?:last|next|this|past) (?:night|week|weekend|month|year|summer|winter|spring|fall"
    r"|autumn)|\d+ may|may \d+|\d{1,4}[-/]\d{1,2}[-/]\d{1,4})\b"
)


def asks_when(text: str) -> bool:
    """Whether ``text`` asks when something happened."""
    return _ASKS_WHEN.search(_lower(text)) is not None


def says_when(text: str) -> bool:
    """Whether ``text`` carries a time expression."""
    return _SAYS_WHEN.search(_lower(text)) is not None
