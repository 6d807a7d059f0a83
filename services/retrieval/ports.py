"""The ports the retrieval domain depends on; adapters implement them.

models.embedding.MiniLMEmbedder -> Embedder; vectors.edge.EdgeVectorIndex and
vectors.qdrant.QdrantVectorIndex -> VectorIndex; documents.index.DocumentIndex -> SearchIndex
(the pipeline's reads) and IndexWriter (the tailer's writes), one object handed to each;
models.rerankers -> Reranker; sources.knowledge.KnowledgeFactSource -> FactSource;
indexing.leadership.PgWriterLease -> WriterLease.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from vera.services.retrieval.domain import (
    Candidate,
    CandidateFeatures,
    ChangePage,
    Fact,
    IndexQuery,
)


class Embedder(Protocol):
    dimensions: int

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors, one per text, computed off the event loop."""
        ...


class VectorIndex(Protocol):
    async def upsert(self, facts: Sequence[Fact], vectors: Sequence[Sequence[float]]) -> None:
        """Idempotent by version id; a version without ``superseded_at`` marks the older
        current versions of its fact key superseded at its ``recorded_at``."""
        ...

    async def search(
        self, vector: Sequence[float], query: IndexQuery, limit: int
    ) -> list[Candidate]:
        """Nearest versions within the query's scopes, states, times and attributes;
        the score is cosine similarity."""
        ...

    async def count(self) -> int: ...

    async def delete(self, version_ids: Sequence[str]) -> None:
        """Removes the versions' points (erasure); unknown ids are ignored."""
        ...

    async def close(self) -> None: ...


class SearchIndex(Protocol):
    """What the pipeline reads of the indexed facts: the lexical leg, the candidates'
    features and whether a scope holds anything (documents.index.DocumentIndex)."""

    async def search(self, text: str, query: IndexQuery, limit: int) -> list[Candidate]:
        """Full-text hits within the same filters; the score is the raw full-text score (> 0)."""
        ...

    async def features(
        self,
        scope_ids: Sequence[str],
        version_ids: Sequence[str],
        vector: Sequence[float],
        query_text: str,
        query: IndexQuery | None = None,
    ) -> Mapping[str, CandidateFeatures]:
        """Per known version: exact dense cosine, the neighbourhood's cosine and whether the
        query names the fact's subject (the in-process memory; none without one); with
        ``query``, a snapshot replay's neighbourhood is its visible one."""
        ...

    async def has_documents(self, query: IndexQuery, *, with_attributes: bool) -> bool:
        """Whether any live version is indexed in the query's scopes (and, when
        ``with_attributes``, also matches its attribute filters)."""
        ...


class IndexWriter(Protocol):
    """What the change-log tailer writes: the documents, the cursor and its writer fence,
    and the in-process memory (documents.index.DocumentIndex)."""

    async def apply(
        self,
        facts: Sequence[Fact],
        position: int,
        vectors: Sequence[Sequence[float]] | None = None,
    ) -> None:
        """Upserts the versions (with their vectors, when given) and advances the change-log
        cursor in one transaction."""
        ...

    async def remember(
        self,
        facts: Sequence[Fact],
        position: int,
        vectors: Sequence[Sequence[float] | None] | None = None,
    ) -> None:
        """A follower's apply: the in-process memory only (the writer stored the documents)."""
        ...

    async def delete(self, version_ids: Sequence[str]) -> None:
        """Removes the versions' documents (and their in-memory entries) for erasure."""
        ...

    async def forget(self, version_ids: Sequence[str]) -> None:
        """A follower's erasure: the in-process memory only."""
        ...

    async def stored_vectors(
        self, version_ids: Sequence[str]
    ) -> Mapping[str, Sequence[float] | None]:
        """The vector stored with each version's document (None: stored without one);
        versions without a document (never written, or erased since) are absent."""
        ...

    async def cursor(self) -> int:
        """The last change-log position applied."""
        ...

    async def indexed_embedding(self) -> str | None:
        """Which embedding made the indexed vectors (None: not recorded)."""
        ...

    async def restart_for_embedding(self, embedding: str) -> None:
        """Rewinds the cursor to the change log's start and records ``embedding``, so the
        tailer replays (and re-embeds) every version."""
        ...

    async def claim_writer(self) -> None:
        """Makes this process the index's writer: from now on every ``apply`` and
        ``restart_for_embedding`` of a process that claimed before raises WriterFenced."""
        ...

    async def check_writer(self) -> None:
        """Raises WriterFenced when another process has claimed the index since this one
        did (before writes that the cursor's transaction cannot cover: the vectors)."""
        ...


class Reranker(Protocol):
    async def rerank(
        self,
        query: str,
        keys: Sequence[str],
        fused: Mapping[str, tuple[float, float, float]],
        texts: Mapping[str, str],
    ) -> dict[str, float]:
        """Re-scores a short list: ``keys`` are best first by fused score, ``texts`` the
        re-read facts' text. Returns key -> rerank score (higher is better) for the keys it
        scored (a prefix of those with text); the pipeline orders them by it, above the
        rest, which keep their fused order."""
        ...


class FactSource(Protocol):
    async def list_changes(
        self, after_position: int, page_size: int, wait_seconds: float = 0.0
    ) -> ChangePage:
        """Changes after ``after_position``; with ``wait_seconds``, an empty answer waits
        that long for one to commit (a long poll)."""
        ...

    async def batch_get_facts(
        self,
        scope_ids: Sequence[str],
        fact_keys: Sequence[str],
        as_of: datetime | None,
        known_as_of: datetime | None,
    ) -> list[Fact]:
        """Authoritative current versions, only within ``scope_ids``; absent keys are
        missing, out of scope, retracted or not valid at the given times."""
        ...


class WriterFenced(RuntimeError):
    """A write refused because another process has claimed the index since this one did
    (it lost its lease and has not noticed yet)."""


class WriterLease(Protocol):
    """Who writes the index: at most one holder per deployment."""

    retry_seconds: float  # how often a process that does not hold it asks again

    async def acquire(self) -> bool:
        """Tries once; True while this process holds the lease."""
        ...

    async def lost(self) -> None:
        """Returns once a held lease is gone."""
        ...

    async def release(self) -> None: ...
