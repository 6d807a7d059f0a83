"""Fitting, activating and serving learned ranking models (the application side of
learned_rank): ``vera rank fit|status|off`` arrive here through the API, the background
fit runs here, and so does the poll that makes a newly activated model serve without a
restart, and the lookup that lets a snapshot replay with the model it was taken with.
Storage and the feedback feed are ports (rank_store, feedback_source)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from vera.errors import InvalidInput, UnsupportedVersion, VeraError
from vera.services.retrieval.learned_rank import (
    HIT_AT,
    ActiveModels,
    FeedbackRow,
    FitPolicy,
    FitReport,
    RankRecord,
    ServedModel,
    fit,
)

log = logging.getLogger(__name__)

_ONE_TICK = timedelta(microseconds=1)  # "after" the newest row a fit saw
# Stored models kept loaded for replays of snapshots taken under a model no longer active.
_PINNED_MODELS = 16


class FeedbackSource(Protocol):
    async def newest(
        self, scope_id: str | None, recorded_after: datetime | None, limit: int
    ) -> list[FeedbackRow]: ...


class ModelStore(Protocol):
    async def record_fit(
        self, scope_id: str | None, report: FitReport, newest_feedback_at: datetime | None
    ) -> RankRecord: ...

    async def deactivate(self, scope_id: str | None) -> RankRecord | None: ...

    async def active(self) -> list[RankRecord]: ...

    async def last_fit(self, scope_id: str | None) -> RankRecord | None: ...

    async def generation(self) -> int: ...

    async def activated_ids(self, scope_id: str | None) -> list[str]: ...

    async def model(self, model_id: str) -> RankRecord | None: ...


@dataclass(frozen=True)
class RankingOptions:
    policy: FitPolicy
    max_training_rows: int
    poll_seconds: float
    auto_fit_new_feedback: int  # 0: no background fit
    auto_fit_check_seconds: float


@dataclass(frozen=True)
class RankStatus:
    """A scope's ranking: the model that serves, a model stored as active that cannot
    (its ``not_served`` says why; the hand-set ranking serves), and the last fit."""

    serving: RankRecord | None
    unservable: RankRecord | None
    last_fit: RankRecord | None


def parse_scope(scope_id: str) -> str | None:
    """'' is the deployment-wide model; anything else must be a project scope id."""
    if not scope_id:
        return None
    try:
        return str(uuid.UUID(scope_id))
    except ValueError:
        raise InvalidInput("scope_id", "not a uuid", reason="malformed") from None


def _project(scope_ids: Sequence[str]) -> str | None:
    """The one project a request stays within, whose own models may rank it."""
    if len(scope_ids) != 1:
        return None
    try:
        return str(uuid.UUID(scope_ids[0]))
    except ValueError:
        return None


class Ranking:
    def __init__(
        self,
        store: ModelStore,
        feedback: FeedbackSource,
        models: ActiveModels,
        options: RankingOptions,
        *,
        version_for: Callable[[str | None], str],
    ) -> None:
        """``models`` is the set the pipeline ranks with (swapped here); ``version_for``
        gives the contract version while a model id (None: no model) serves."""
        self._store = store
        self._feedback = feedback
        self._models = models
        self._options = options
        self._version_for = version_for
        self._generation: int | None = None
        self._fitting = asyncio.Lock()
        self._version_of_id: dict[str, str] = {}
        self._pinned: OrderedDict[str, ServedModel] = OrderedDict()

    def served_version(self, scope_ids: Sequence[str]) -> str:
        served = self._models.select(scope_ids)
        return served.assembler_version if served else self._version_for(None)

    def version_of(self, record: RankRecord | None) -> str:
        return self._version_for(record.model_id if record and record.serves else None)

    async def pinned(self, scope_ids: Sequence[str], version: str) -> ActiveModels:
        """The models a replay ranks with: the ranking its contract ``version`` names (the
        model serving now, the hand-set ranking, or a stored model that served the scope
        before), whatever serves now. UnsupportedVersion when no ranking here has that
        version: the model is gone or cannot serve, or another part of the contract (the
        embedding, the index, a setting) changed since."""
        scopes = list(dict.fromkeys(s for s in scope_ids if s))
        served = self._models.select(scopes)
        if served is not None and served.assembler_version == version:
            return ActiveModels({None: served})
        if version == self._version_for(None):
            return ActiveModels()
        for model_id in await self._store.activated_ids(_project(scopes)):
            if await self._version_of(model_id) == version:
                return ActiveModels({None: await self._stored(model_id, version)})
        raise UnsupportedVersion()

    async def _version_of(self, model_id: str) -> str:
        version = self._version_of_id.get(model_id)
        if version is None:
            # A digest of the whole ranking configuration: kept per id, computed once.
            version = await asyncio.to_thread(self._version_for, model_id)
            self._version_of_id[model_id] = version
        return version

    async def _stored(self, model_id: str, version: str) -> ServedModel:
        """The stored model, loaded once (a model's parameters never change)."""
        cached = self._pinned.get(model_id)
        if cached is None:
            record = await self._store.model(model_id)
            if record is None or record.ranker is None:
                raise UnsupportedVersion()  # deleted since, or fitted on other features
            cached = ServedModel(record.ranker, version)
            self._pinned[model_id] = cached
            while len(self._pinned) > _PINNED_MODELS:
                self._pinned.popitem(last=False)
        self._pinned.move_to_end(model_id)
        return cached

    async def fit(
        self, scope_id: str | None, max_rows: int, recorded_after: datetime | None
    ) -> RankRecord:
        cap = self._options.max_training_rows
        if not 0 <= max_rows <= cap:
            raise InvalidInput("max_rows", f"must be 0..{cap}", reason="out_of_range")
        async with self._fitting:
            rows = await self._feedback.newest(scope_id, recorded_after, max_rows or cap)
            # CPU work (scikit-learn): off the event loop.
            report = await asyncio.to_thread(fit, rows, self._options.policy)
            newest = max((r.recorded_at for r in rows if r.recorded_at), default=None)
            record = await self._store.record_fit(scope_id, report, newest)
            await self.refresh()
        log.info(
            "rank fit %s: %s (%d rows, out of fold MRR %.4f vs hand-set %.4f, hit@%d %.4f vs %.4f)",
            "project" if scope_id else "deployment",
            record.outcome.value,
            record.training_rows,
            record.model_figure,
            record.hand_figure,
            HIT_AT,
            report.model_hit,
            report.hand_hit,
        )
        return record

    async def status(self, scope_id: str | None) -> RankStatus:
        active = next((r for r in await self._store.active() if r.scope_id == scope_id), None)
        last = await self._store.last_fit(scope_id)
        if active is not None and not active.serves:
            return RankStatus(None, active, last)
        return RankStatus(active, None, last)

    async def off(self, scope_id: str | None) -> RankRecord | None:
        disabled = await self._store.deactivate(scope_id)
        await self.refresh()
        return disabled

    async def refresh(self) -> None:
        """Loads the active models and swaps them in whole."""
        generation = await self._store.generation()
        served: dict[str | None, ServedModel] = {}
        for record in await self._store.active():
            if record.serves and record.ranker is not None:
                served[record.scope_id] = ServedModel(
                    record.ranker, self._version_for(record.model_id)
                )
        self._models.by_scope = served
        self._generation = generation

    async def watch(self) -> None:
        """Polls the one-row generation; reloads when another process (or a fit here)
        changed what is active. One indexed read per ``poll_seconds``."""
        while True:
            try:
                if await self._store.generation() != self._generation:
                    await self.refresh()
            except Exception:
                log.warning("could not check the active ranking models; will retry")
            await asyncio.sleep(self._options.poll_seconds)

    async def auto_fit(self, in_charge: Callable[[], bool] = lambda: True) -> None:
        """Fits the deployment-wide model again once ``auto_fit_new_feedback`` rows arrived
        after the newest row of its last fit; the activation rule is the same. Only while
        ``in_charge()`` (the replica that writes the index), so N replicas fit once."""
        threshold = self._options.auto_fit_new_feedback
        if threshold <= 0:
            return
        while True:
            await asyncio.sleep(self._options.auto_fit_check_seconds)
            if not in_charge():
                continue
            try:
                last = await self._store.last_fit(None)
                newest = last.newest_feedback_at if last else None
                after = newest + _ONE_TICK if newest else None
                fresh = await self._feedback.newest(None, after, threshold)
                if len(fresh) >= threshold:
                    await self.fit(None, 0, None)
            except VeraError as exc:
                log.warning("background rank fit skipped (%s)", exc.reason)
            except Exception:
                log.exception("background rank fit failed")
