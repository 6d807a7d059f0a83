"""The columns a scope of the memory is made of (numpy arrays that grow by doubling, a
term's postings, interned names, BM25 weights kept between reads) and the numpy helpers its
arithmetic shares."""

from __future__ import annotations

from array import array
from collections.abc import Callable

import numpy as np
from numpy.typing import DTypeLike

# Neighbour rows of a term's postings beyond 1/DENSE_SHARE of a scope's facts: its context
# field is summed over every slot (cheaper than selecting the ones it reaches).
DENSE_SHARE = 8
# The most bytes of reused per-term weights a scope keeps between writes, per fact in it
# (see TermWeights): the 124 distinct terms of the scale bench's 101 questions take 223.
TERM_WEIGHTS_BYTES_PER_FACT = 256


class Growable:
    """A numpy column that grows by doubling; ``view()`` is its filled part (a view stays
    valid after a later growth: it keeps the old buffer)."""

    __slots__ = ("data", "n")

    def __init__(self, dtype: type, capacity: int = 4) -> None:
        self.data: np.ndarray = np.zeros(capacity, dtype)
        self.n = 0

    def append(self, value: float) -> None:
        if self.n == len(self.data):
            grown = np.zeros(max(4, 2 * len(self.data)), self.data.dtype)
            grown[: self.n] = self.data
            self.data = grown
        self.data[self.n] = value
        self.n += 1

    def view(self) -> np.ndarray:
        return self.data[: self.n]

    # Pickled as its filled part (memory/snapshot_file.py); it grows again on the next append.
    def __getstate__(self) -> np.ndarray:
        return self.view()

    def __setstate__(self, filled: np.ndarray) -> None:
        self.data = writable(filled)
        self.n = len(filled)

    @classmethod
    def of(cls, filled: np.ndarray) -> Growable:
        column = cls.__new__(cls)
        column.data, column.n = filled, len(filled)
        return column


class Postings:
    """One term's postings: slots ascending (each once) and the term's count in each."""

    __slots__ = ("slots", "tfs")

    def __init__(self) -> None:
        self.slots = Growable(np.int32)
        self.tfs = Growable(np.int32)  # exact integers: the BM25 arithmetic is float64

    def add(self, slot: int, tf: int) -> None:
        self.slots.append(slot)
        self.tfs.append(tf)

    def __len__(self) -> int:
        return self.slots.n

    def get(self) -> tuple[np.ndarray, np.ndarray]:
        return self.slots.view(), self.tfs.view()


class Names:
    """Interned attribute values (predicates, types, subject keys): a small code per slot."""

    def __init__(self) -> None:
        self.code_of: dict[str, int] = {}
        self.names: list[str] = []

    def code(self, name: str) -> int:
        code = self.code_of.get(name)
        if code is None:
            code = self.code_of[name] = len(self.names)
            self.names.append(name)
        return code


Weights = tuple[np.ndarray, np.ndarray, slice | np.ndarray | None, np.ndarray | None]


def _nbytes(weights: Weights) -> int:
    """What kept weights hold beyond the postings (their slots are the postings' own)."""
    return sum(part.nbytes for part in weights[1:] if isinstance(part, np.ndarray))


class TermWeights:
    """One scope's BM25 weights per query term, for reads under the same statistics: kept
    for current reads until the scope's next write, and made afresh for each snapshot
    replay. A term's weights are kept once it comes back (a term met once costs what it
    did before), at most TERM_WEIGHTS_BYTES_PER_FACT a fact of them, the least recently
    used dropped first. Every slot's context-field norm is computed once, when a term
    first needs it."""

    def __init__(self, *, keep: bool, facts: int = 0) -> None:
        self._keep = keep
        self._budget = TERM_WEIGHTS_BYTES_PER_FACT * facts
        self._context_norm: np.ndarray | None = None
        self._met: set[tuple[str, bool]] = set()
        self._entries: dict[tuple[str, bool], Weights] = {}
        self._bytes = 0

    def of(self, term: str, context: bool, compute: Callable[[bool], Weights]) -> Weights:
        key = (term, context)
        found = self._entries.pop(key, None)
        if found is not None:
            self._entries[key] = found  # the most recently used last
            return found
        if not self._keep or key not in self._met:
            self._met.add(key)
            return compute(False)
        weights = compute(True)
        size = _nbytes(weights)
        while self._entries and self._bytes + size > self._budget:
            self._bytes -= _nbytes(self._entries.pop(next(iter(self._entries))))
        if size <= self._budget:
            self._entries[key] = weights
            self._bytes += size
        return weights

    def every_context_norm(self, compute: Callable[[], np.ndarray]) -> np.ndarray:
        if self._context_norm is None:
            self._context_norm = compute()
        return self._context_norm


# The slots of a source (array("i")) as numpy sees them.
SOURCE_DTYPE = np.dtype(f"i{array('i').itemsize}")


def concatenated(parts: list[np.ndarray], dtype: DTypeLike) -> tuple[np.ndarray, np.ndarray]:
    """(each part's length, the parts end to end)."""
    lengths = np.fromiter((len(part) for part in parts), np.int64, len(parts))
    return lengths, np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


def bounds(lengths: np.ndarray) -> zip:
    ends = np.cumsum(lengths)
    return zip((ends - lengths).tolist(), ends.tolist(), strict=True)


def writable(column: np.ndarray) -> np.ndarray:
    return column if column.flags.writeable else column.copy()


def max_or(values: np.ndarray, empty: float) -> float:
    return float(values.max()) if len(values) else empty


def min_or(values: np.ndarray, empty: float) -> float:
    return float(values.min()) if len(values) else empty


def best_slots(score: np.ndarray, slots: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` best-scored of ``slots`` (ascending), ties at the cut taken in slot
    order: which of equal scores a partition keeps, and in what order, changed between
    numpy releases (2.4.6 returned other ties than the golden file's)."""
    values = score[slots]
    cut = np.partition(values, len(values) - count)[len(values) - count]
    above = slots[values > cut]
    return np.concatenate([above, slots[values == cut][: count - len(above)]])


def neighbour_tfs(
    targets: np.ndarray, tfs: np.ndarray, n: int
) -> tuple[np.ndarray | None, np.ndarray]:
    """(distinct slots ascending, summed tf) over the neighbour rows ``targets`` of a
    term's postings (-1: no neighbour), each row weighted by its posting's ``tfs``; with
    neighbours for a large share of the ``n`` slots, (None, summed tf of every slot).

    Shifted by one, the missing neighbours land in bin 0 and are dropped afterwards
    (cheaper than selecting the present ones first); a term that occurs once in each of
    its facts (most terms) is counted without weights."""
    shifted = targets.ravel() + 1
    weights = None if tfs.max() == 1 else np.repeat(tfs, targets.shape[1])
    if len(shifted) * DENSE_SHARE >= n:
        return None, np.bincount(shifted, weights=weights, minlength=n + 1)[1 : n + 1]
    distinct, summed = sum_by_slot(shifted, weights, n + 1)
    if len(distinct) and distinct[0] == 0:
        distinct, summed = distinct[1:], summed[1:]
    return distinct - 1, summed


def sum_by_slot(
    slots: np.ndarray, weights: np.ndarray | None, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """(distinct slots ascending, summed weight of each, a count without ``weights``):
    sorting when there are few, counting over all ``n`` slots when there are many."""
    if len(slots) * 16 < n:
        distinct, inverse = np.unique(slots, return_inverse=True)
        return distinct, np.bincount(inverse, weights=weights)
    summed = np.bincount(slots, weights=weights, minlength=n)[:n]
    distinct = np.flatnonzero(summed)
    return distinct, summed[distinct]
