"""BM25 terms: each distinct word is stemmed once (the memory refill at start stemmed every
occurrence), and cached stems are a fresh Snowball stemmer's, whichever thread asks; a
question that asks when, and a text that says when."""

from __future__ import annotations

import itertools
import sys
import threading

import pytest
import snowballstemmer

from vera.services.retrieval.memory import text


class _CountingStemmer:
    def __init__(self) -> None:
        self._inner = snowballstemmer.stemmer("english")
        self.words: list[str] = []

    def stemWord(self, word: str) -> str:  # snowballstemmer's name
        self.words.append(word)
        return self._inner.stemWord(word)


def test_a_word_seen_again_is_not_stemmed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = _CountingStemmer()
    monkeypatch.setattr(text._STEMMERS, "english", counting, raising=False)
    text._cached_stem.cache_clear()
    line = "deploys deploying the deploys deployed rollbacks"
    first = text.terms(line)
    assert text.terms(line) == first
    assert first == ["deploy", "deploy", "deploy", "deploy", "rollback"]
    assert sorted(counting.words) == ["deployed", "deploying", "deploys", "rollbacks"]


def test_cached_stems_are_a_fresh_stemmers_when_threads_stem_at_once() -> None:
    # Words no call has seen (each thread its own), so every one is stemmed, by six
    # threads at once with a thread switch every microsecond.
    stems = ("connect", "relat", "organiz", "happ", "generous", "deploy")
    endings = ("ing", "ational", "ness", "ly", "s", "ed", "ions", "izations")

    def words_of(thread: int) -> list[str]:
        return [f"{stems[thread]}{a}{b}" for a, b in itertools.product("aeiou", endings)]

    reference = snowballstemmer.stemmer("english")
    expected = {n: [reference.stemWord(w) for w in words_of(n)] for n in range(len(stems))}
    text._cached_stem.cache_clear()
    got: dict[int, list[list[str]]] = {}

    def stem(n: int) -> None:
        got[n] = [[text._stem(w) for w in words_of(n)] for _ in range(20)]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=stem, args=(n,)) for n in range(len(stems))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert got == {n: [expected[n]] * 20 for n in range(len(stems))}


def test_long_words_are_stemmed_without_taking_a_cache_entry() -> None:
    text._cached_stem.cache_clear()
    long_words = [f"token{n:040d}s" for n in range(50)]
    assert text.terms(" ".join(long_words)) == [
        snowballstemmer.stemmer("english").stemWord(w) for w in long_words
    ]
    assert text._cached_stem.cache_info().currsize == 0
    text.terms("deploys")
    assert text._cached_stem.cache_info().currsize == 1


@pytest.mark.parametrize(
    ("question", "asks"),
    [("When did we move billing to Argo CD?", True), ("what year was the ADR written", True),
     ("How long ago did payments-api change owner?", True),
     ("Who owns payments-api?", False), ("What is the deploy window?", False)],
)
def test_a_question_that_asks_when(question: str, asks: bool) -> None:
    assert text.asks_when(question) is asks


@pytest.mark.parametrize(
    ("fact_text", "says"),
    [("moved to Argo CD last week", True), ("decided on 2024-03-01", True),
     ("rotated the keys in March 2024", True), ("the outage was 3 days ago", True),
     ("released on 7 May", True), ("we met yesterday", True),
     ("the team may deploy on weekdays", False), ("payments-api is owned by Atlas", False)],
)
def test_a_text_that_says_when(fact_text: str, says: bool) -> None:
    assert text.says_when(fact_text) is says
