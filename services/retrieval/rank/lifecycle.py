"""Fitting, activating and serving learned ranking models (the application side of
learned.py): ``vera rank fit|status|off|on`` arrive here through the API; a fit replays
the queries behind its feedback through the serving path before learned.py judges the
model; the background fit runs here, and so do the serving check that switches off a
model falling behind the hand-set order, the poll that makes a newly activated model serve
without a restart, and the lookup that lets a snapshot replay with the model it was taken
with. Storage, the feedback feed and the serving path are ports (store.py,
feedback_source.py, pipeline/retriever.py's Retriever)."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from vera.errors import InvalidInput, UnsupportedVersion, VeraError
from vera.request_fields import as_uuid, optional_uuid
from vera.services.retrieval.domain import Result
from vera.services.retrieval.rank.learned import (
    HIT_AT,
    ActiveModels,
    FeedbackRow,
    FitPolicy,
    FitReport,
    Guard,
    RankRecord,
    Replay,
    ServedModel,
    fell_behind,
    fit,
    hand_set,
    judge,
    labels,
    served_by,
)

log = logging.getLogger(__name__)

_ONE_TICK = timedelta(microseconds=1)  # "after" the newest row a fit saw
# Stored models kept loaded for replays of snapshots taken under a model no longer active.
_PINNED_MODELS = 16
# Replays run through the serving path side by side, bounded like a few callers.
_REPLAYS_AT_ONCE = 4


class FeedbackSource(Protocol):
    async def newest(
        self, scope_id: str | None, recorded_after: datetime | None, limit: int
    ) -> list[FeedbackRow]: ...


class ServingPath(Protocol):
    async def candidates(self, scope_id: str, query: str) -> Sequence[Result] | None:
        """The query's candidates in the hand-set order, as the learned stage would receive
        them for a pack of ``scope_id``; None when the answer was degraded (no model
        serves one)."""
        ...


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

    async def switch_off(self, model_id: str, guard: Guard) -> RankRecord | None: ...

    async def enable(self, scope_id: str | None) -> RankRecord | None: ...

    async def last_switched_off(self, scope_id: str | None) -> RankRecord | None: ...


@dataclass(frozen=True)
class RankingOptions:
    policy: FitPolicy
    max_training_rows: int
    poll_seconds: float
    auto_fit_new_feedback: int  # 0: no background fit
    auto_fit_check_seconds: float
    replay_queries: int  # the most (newest) distinct queries a fit replays
    guard_check_seconds: float  # 0: no serving check
    guard_min_queries: int
    guard_max_queries: int
    guard_margin: float


@dataclass(frozen=True)
class RankStatus:
    """A scope's ranking: the model that serves, a model stored as active that cannot
    (its ``not_served`` says why; the hand-set ranking serves), the last fit, and the
    last model the serving check switched off."""

    serving: RankRecord | None
    unservable: RankRecord | None
    last_fit: RankRecord | None
    switched_off: RankRecord | None = None


def parse_scope(scope_id: str) -> str | None:
    """'' is the deployment-wide model; anything else must be a project scope id."""
    scope = optional_uuid("scope_id", scope_id)
    return str(scope) if scope is not None else None


def _project(scope_ids: Sequence[str]) -> str | None:
    """The one project a request stays within, whose own models may rank it."""
    if len(scope_ids) != 1:
        return None
    scope = as_uuid(scope_ids[0])
    return str(scope) if scope is not None else None


class Ranking:
    def __init__(
        self,
        store: ModelStore,
        feedback: FeedbackSource,
        serving_path: ServingPath,
        models: ActiveModels,
        options: RankingOptions,
        *,
        version_for: Callable[[str | None], str],
    ) -> None:
        """``models`` is the set the pipeline ranks with (swapped here); ``version_for``
        gives the contract version while a model id (None: no model) serves."""
        self._store = store
        self._feedback = feedback
        self._serving_path = serving_path
        self._models = models
        self._options = options
        self._version_for = version_for
        self._generation: int | None = None
        self._fitting = asyncio.Lock()
        self._version_of_id: dict[str, str] = {}
        self._pinned: OrderedDict[str, ServedModel] = OrderedDict()
        # Models the serving check switched off since this process started (a metric).
        self.switch_offs = 0

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
            replays = await self.replays(rows, self._options.replay_queries)
            # CPU work (scikit-learn): off the event loop.
            report = await asyncio.to_thread(fit, rows, replays, self._options.policy)
            newest = max((r.recorded_at for r in rows if r.recorded_at), default=None)
            record = await self._store.record_fit(scope_id, report, newest)
            await self.refresh()
        log.info(
            "rank fit %s: %s (%d rows, %d queries replayed: MRR@10 %.4f vs hand-set %.4f, "
            "hit@%d %.4f vs %.4f, recall@10 %.4f vs %.4f)",
            "project" if scope_id else "deployment",
            record.outcome.value,
            record.training_rows,
            report.model.queries,
            report.model.mrr,
            report.hand.mrr,
            HIT_AT,
            report.model.hit,
            report.hand.hit,
            report.model.recall,
            report.hand.recall,
        )
        return record

    async def replays(self, rows: Sequence[FeedbackRow], most: int) -> list[Replay]:
        """The newest ``most`` distinct queries of ``rows`` (newest first) with a label,
        each replayed once through the serving path; a query whose replay fails or is
        degraded is left out (no model would serve it)."""
        up = labels(rows)
        asked: dict[tuple[str, str], str] = {}
        for row in rows:
            key = (row.scope_id, row.query_digest)
            if row.query and row.scope_id and key in up and len(asked) < most:
                asked.setdefault(key, row.query)
        gate = asyncio.Semaphore(_REPLAYS_AT_ONCE)

        async def replay(key: tuple[str, str], query: str) -> Replay | None:
            async with gate:
                try:
                    found = await self._serving_path.candidates(key[0], query)
                except VeraError as exc:
                    log.info("a replayed query was left out (%s)", exc.reason)
                    return None
            return Replay(key[1], tuple(found), up[key]) if found is not None else None

        done = await asyncio.gather(*(replay(key, query) for key, query in asked.items()))
        return [r for r in done if r is not None]

    async def status(self, scope_id: str | None) -> RankStatus:
        active = next((r for r in await self._store.active() if r.scope_id == scope_id), None)
        last = await self._store.last_fit(scope_id)
        switched = await self._store.last_switched_off(scope_id)
        if active is not None and not active.serves:
            return RankStatus(None, active, last, switched)
        return RankStatus(active, None, last, switched)

    async def off(self, scope_id: str | None) -> RankRecord | None:
        disabled = await self._store.deactivate(scope_id)
        await self.refresh()
        return disabled

    async def on(self, scope_id: str | None) -> RankRecord | None:
        """Serves again the scope's model the serving check switched off last (an operator
        overruling it); the check watches it afresh, from feedback recorded from now on."""
        enabled = await self._store.enable(scope_id)
        await self.refresh()
        return enabled

    async def check_serving(self) -> list[RankRecord]:
        """The serving check, once: each serving model against the hand-set order on the
        newest queries that received feedback since it started serving, replayed now;
        one that falls behind by the margin is switched off. Returns those switched off."""
        options = self._options
        switched = []
        for record in await self._store.active():
            ranker = record.ranker
            if not record.serves or ranker is None:
                continue
            rows = await self._feedback.newest(
                record.scope_id, record.watched_since, options.max_training_rows
            )
            replays = await self.replays(rows, options.guard_max_queries)
            model = judge(replays, served_by(ranker))
            hand = judge(replays, hand_set)
            if model.queries < options.guard_min_queries:
                continue
            if not fell_behind(model, hand, options.guard_margin):
                continue
            off = await self._store.switch_off(
                record.model_id, Guard(model, hand, datetime.now(UTC))
            )
            if off is not None:
                switched.append(off)
                self.switch_offs += 1
                log.warning(
                    "rank model %s switched off: behind the hand-set order on %d queries "
                    "(MRR@10 %.4f vs %.4f, hit@%d %.4f vs %.4f, recall@10 %.4f vs %.4f)",
                    record.model_id,
                    model.queries,
                    model.mrr,
                    hand.mrr,
                    HIT_AT,
                    model.hit,
                    hand.hit,
                    model.recall,
                    hand.recall,
                )
        if switched:
            await self.refresh()
        return switched

    async def guard(self, in_charge: Callable[[], bool] = lambda: True) -> None:
        """Runs the serving check every ``guard_check_seconds`` in the replica in charge
        (0: never)."""
        if self._options.guard_check_seconds <= 0:
            return
        while True:
            await asyncio.sleep(self._options.guard_check_seconds)
            if not in_charge():
                continue
            try:
                await self.check_serving()
            except VeraError as exc:
                log.warning("serving check of the ranking models skipped (%s)", exc.reason)
            except Exception:
                log.exception("serving check of the ranking models failed")

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
