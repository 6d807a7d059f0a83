"""When the in-process memory is snapshotted (snapshot_file.py) and, by the index writer,
published for new replicas (snapshot_shared.py): under which key, and at which change-log
position the memory stands."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

import asyncpg

from vera.services.retrieval.memory.facts import FactMemory
from vera.services.retrieval.memory.snapshot_file import Dumped, MemorySnapshot, SnapshotKey
from vera.services.retrieval.memory.snapshot_shared import SharedSnapshot
from vera.services.retrieval.memory.worker import MemoryWorker

log = logging.getLogger(__name__)


class IndexState(Protocol):
    """The index's state row as a snapshot needs it (documents/cursor.py's PgIndexCursor)."""

    # The writer epoch this process claimed (None: it never claimed).
    writer_epoch: int | None

    async def current(self) -> Mapping[str, Any]:
        """``documents_epoch`` and ``embedding`` (and ``position``), as committed now."""
        ...


class MemorySnapshots:
    def __init__(
        self,
        worker: MemoryWorker,
        cursor: IndexState,
        local: MemorySnapshot,
        shared: SharedSnapshot | None,
    ) -> None:
        self._worker = worker
        self._cursor = cursor
        self.local = local
        # The writer's snapshot in the database, for a start without a file of its own.
        self._shared = shared
        # The key a snapshot of the memory is made under (None: none may be made of it) and
        # the change-log position it stands at (kept on the memory's thread): the rows past
        # it are what a restart from its snapshot reads.
        self.key: SnapshotKey | None = None
        self.position = 0

    def key_for(self, documents_epoch: object, embedding: str | None) -> SnapshotKey | None:
        return self.local.key(str(documents_epoch), embedding, self._worker.memory.dimensions)

    async def restore(
        self, conn: asyncpg.Connection, key: SnapshotKey, position: int
    ) -> tuple[tuple[FactMemory, int] | None, str]:
        """The memory and position of this replica's snapshot or, failing that, of the
        writer's copy (fetched into this replica's file first); and where it came from."""
        restored = await self._worker.run(self.local.read, key, position)
        loaded_from = "snapshot"
        if (
            restored is None
            and self._shared is not None
            and await self._shared.fetch(conn, key, position, self.local)
        ):
            restored = await self._worker.run(self.local.read, key, position)
            loaded_from = "shared snapshot"
        return restored, loaded_from

    async def save(self) -> int | None:
        """Writes the memory's snapshot if the documents are still those it holds (no
        erasure or re-embedding since it was loaded or replayed: either changes the
        epoch); returns the position written. Never raises: a snapshot only shortens the
        next start."""
        if self.key is None:
            return None
        try:
            state = await self._cursor.current()
            key = self.key_for(state["documents_epoch"], state["embedding"])
            if key != self.key:
                return None
            dumped = await self._worker.run(self._dump, key)
            if dumped is None:
                return None
            # Only the pickling needs the memory; queries need not wait for the disk.
            if not await asyncio.to_thread(self.local.commit, dumped):
                return None  # an erasure came in between
            return dumped.position
        except Exception as exc:
            log.warning("memory snapshot not written (%s)", type(exc).__name__)
        return None

    async def keep(self, every_seconds: float) -> None:
        """Writes a snapshot every ``every_seconds`` in which the memory moved on, so a
        replica that crashes restarts from a recent one, and (the writer, when sharing)
        publishes the latest for new replicas (runs until cancelled)."""
        written = self.position
        while True:
            await asyncio.sleep(every_seconds)
            if self.position != written:
                saved = await self.save()
                written = written if saved is None else saved
            await self.publish()

    async def publish(self) -> int | None:
        """The writer copies its latest snapshot into the database for new replicas, unless
        that copy is there already; returns the position published. Never raises."""
        epoch = self._cursor.writer_epoch
        if self._shared is None or epoch is None:
            return None
        try:
            return await self._shared.publish(self.local.path, epoch)
        except Exception as exc:
            log.warning("memory snapshot not published (%s)", type(exc).__name__)
            return None

    def _dump(self, key: SnapshotKey) -> Dumped | None:
        if self.position == 0:
            return None  # a restart from it would read every row anyway
        return self.local.dump(self._worker.memory, key, self.position)

    def replaying(self, key: SnapshotKey | None) -> None:
        """From the start of the log, under a new epoch (on the memory's thread)."""
        self.position = 0
        self.key = key

    def adopt_epoch(self, epoch: object) -> None:
        """The writer made this epoch and its memory holds what documents hold: its
        snapshots go on under it (a follower's cannot know it saw the last one)."""
        if self.key is not None:
            self.key = replace(self.key, documents_epoch=str(epoch))
