"""`vera rank fit|status|off|on`: the learned ranking stage's operator commands, a thin
client of the retrieval service (FitRankModel, GetRankStatus, DisableRankModel,
EnableRankModel).

The deployment-wide model is the default (``--all``); ``--project`` names a project (slug
or id) the local principal reads, resolved through identity. A fit trains only on
result-level feedback whose signal vector the server produced, replays the feedback's
queries through the serving path and activates its model only when, out of fold, it is no
worse than the hand-set ranking at hit@5 and recall@10 and beats its MRR@10
(learned_rank.verdict); ``status`` says what serves and why, with those replayed figures,
a model stored as active that this release cannot serve, and a model the serving check
switched off for falling behind the hand-set ranking (``on`` serves it again).
Exit codes: 0 done (also a fit that did not activate), 1 the stack could not be reached
or failed, 2 refused.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vera.commands import Subcommands, settings_at
from vera.config import Settings
from vera.errors import VeraError
from vera.retrieval.v1 import retrieval_pb2

if TYPE_CHECKING:
    from vera.rpc.backends import Backends

# Refusals: the request was understood and declined; anything else is a failure to reach
# or run the stack.
_REFUSED = frozenset({"INVALID_INPUT", "NOT_FOUND", "PROJECT_OUT_OF_SCOPE", "AMBIGUOUS_PROJECT"})
OUTCOMES = {
    retrieval_pb2.RANK_FIT_OUTCOME_ACTIVATED: "activated",
    retrieval_pb2.RANK_FIT_OUTCOME_TOO_LITTLE_FEEDBACK: "too_little_feedback",
    retrieval_pb2.RANK_FIT_OUTCOME_ONE_SIDED_FEEDBACK: "one_sided_feedback",
    retrieval_pb2.RANK_FIT_OUTCOME_NOT_BETTER: "not_better",
    retrieval_pb2.RANK_FIT_OUTCOME_WORSE_AT_TOP: "worse_at_top",
    retrieval_pb2.RANK_FIT_OUTCOME_WORSE_AT_RECALL: "worse_at_recall",
}
NOT_SERVED = {
    retrieval_pb2.RANK_NOT_SERVED_REASON_FITTED_ON_OTHER_FEATURES: "fitted_on_other_features",
}


def add_parser(commands: Subcommands) -> None:
    rank = commands.add_parser("rank", help="the learned ranking stage: fit, status, off, on")
    sub = rank.add_subparsers(dest="rank_command", required=True)
    for name, help_text in (
        (
            "fit",
            "train on recorded feedback; activate only if, replayed out of fold, it is no worse"
            " than the hand-set ranking at hit@5 and recall@10 and beats its MRR@10",
        ),
        ("status", "the active model and the last fit, with their replayed figures"),
        ("off", "deactivate the model: the hand-set ranking serves the next call"),
        ("on", "serve again the model the serving check switched off last"),
    ):
        command = sub.add_parser(name, help=help_text)
        scope = command.add_mutually_exclusive_group()
        scope.add_argument("--project", help="a project's own model (slug or id)")
        if name != "status":
            scope.add_argument(
                "--all", action="store_true", help="the deployment-wide model (the default)"
            )
        command.add_argument("--data-dir", type=Path, help="data dir of the running stack")
        command.add_argument("--json", action="store_true", help="print one JSON object")
        if name == "fit":
            command.add_argument(
                "--max-rows",
                type=int,
                default=0,
                help="only the N most recent feedback rows (default: all)",
            )
            command.add_argument(
                "--since",
                type=datetime.fromisoformat,
                help="only feedback recorded at or after this ISO 8601 time",
            )


def _figures_of(figures: retrieval_pb2.RankFigures) -> dict[str, Any]:
    return {
        "queries": figures.queries,
        "hit": figures.hit,
        "recall": figures.recall,
        "mrr": figures.mrr,
    }


def _guard(guard: retrieval_pb2.RankGuard) -> dict[str, Any]:
    return {
        "at": guard.switched_off_time.ToDatetime().isoformat() + "Z",
        "model": _figures_of(guard.model),
        "hand": _figures_of(guard.hand),
    }


def _model(model: retrieval_pb2.RankModel, present: bool) -> dict[str, Any] | None:
    if not present:
        return None
    return {
        "model_id": model.model_id,
        "scope": "project" if model.scope_id else "deployment",
        "project_id": model.scope_id,
        "outcome": OUTCOMES.get(model.outcome, "unspecified"),
        "activated": model.outcome == retrieval_pb2.RANK_FIT_OUTCOME_ACTIVATED,
        "active": model.active,
        "training_rows": model.training_rows,
        "training_queries": model.training_queries,
        "evaluated_packs": model.evaluated_packs,
        "metric": model.metric,
        "model_figure": model.model_figure,
        "hand_figure": model.hand_figure,
        "hit_at": model.hit_at,
        "model_hit": model.model_hit if model.HasField("model_hit") else None,
        "hand_hit": model.hand_hit if model.HasField("hand_hit") else None,
        "model_recall": model.model_recall if model.HasField("model_recall") else None,
        "hand_recall": model.hand_recall if model.HasField("hand_recall") else None,
        "cut": model.cut,
        "replayed_queries": model.replayed_queries,
        "switched_off": _guard(model.switched_off) if model.HasField("switched_off") else None,
        "not_served": NOT_SERVED.get(model.not_served_reason),
        "trained_at": model.trained_at.ToDatetime().isoformat() + "Z",
        "assembler_version": model.assembler_version,
    }


@contextlib.asynccontextmanager
async def _backends(settings: Settings) -> AsyncIterator[Backends]:
    # A fit reads every feedback row and trains: Backends gives retrieval its longer
    # deadline.
    from vera.rpc.backends import Backends

    backends = Backends.open(settings, caller="cli")
    try:
        yield backends
    finally:
        await backends.close()


async def _scope(backends: Backends, settings: Settings, project: str | None) -> str:
    """'' for the deployment-wide model; else the project's id, resolved as the local
    principal (the feedback the caller may read)."""
    if not project:
        return ""
    from vera.identity.v1 import identity_pb2

    resolved = await backends.identity.ResolveProject(
        identity_pb2.ResolveProjectRequest(
            principal_id=str(settings.mcp.local_principal_id), project=project
        )
    )
    return str(resolved.project.project_id)


async def fit(
    settings: Settings,
    *,
    project: str | None = None,
    max_rows: int = 0,
    since: datetime | None = None,
) -> dict[str, Any]:
    from vera.rpc.timestamps import to_timestamp

    async with _backends(settings) as backends:
        response = await backends.retrieval.FitRankModel(
            retrieval_pb2.FitRankModelRequest(
                scope_id=await _scope(backends, settings, project),
                max_rows=max_rows,
                recorded_after=to_timestamp(since),
            )
        )
    fitted = _model(response.model, True)
    assert fitted is not None
    return fitted


async def status(settings: Settings, *, project: str | None = None) -> dict[str, Any]:
    async with _backends(settings) as backends:
        scope = await _scope(backends, settings, project)
        response = await backends.retrieval.GetRankStatus(
            retrieval_pb2.GetRankStatusRequest(scope_id=scope)
        )
    return {
        **_scope_fields(scope),
        "active": _model(response.active, response.HasField("active")),
        "unservable": _model(response.unservable, response.HasField("unservable")),
        "last_fit": _model(response.last_fit, response.HasField("last_fit")),
        "switched_off": _model(response.switched_off, response.HasField("switched_off")),
        "assembler_version": response.assembler_version,
    }


def _scope_fields(scope: str) -> dict[str, Any]:
    """Which model an answer is about: the deployment-wide one or a project's."""
    return {"scope": "project" if scope else "deployment", "project_id": scope}


async def on(settings: Settings, *, project: str | None = None) -> dict[str, Any]:
    async with _backends(settings) as backends:
        scope = await _scope(backends, settings, project)
        response = await backends.retrieval.EnableRankModel(
            retrieval_pb2.EnableRankModelRequest(scope_id=scope)
        )
    return {
        **_scope_fields(scope),
        "enabled": _model(response.enabled, response.HasField("enabled")),
        "assembler_version": response.assembler_version,
    }


async def off(settings: Settings, *, project: str | None = None) -> dict[str, Any]:
    async with _backends(settings) as backends:
        scope = await _scope(backends, settings, project)
        response = await backends.retrieval.DisableRankModel(
            retrieval_pb2.DisableRankModelRequest(scope_id=scope)
        )
    return {
        **_scope_fields(scope),
        "disabled": _model(response.disabled, response.HasField("disabled")),
        "assembler_version": response.assembler_version,
    }


def _figures(model: dict[str, Any]) -> str:
    trained = f"{model['training_rows']} rows, {model['training_queries']} queries"
    if model["model_recall"] is None:
        # A fit from before replay judging: its figures are over the labelled packs only.
        hit = (
            f", hit@{model['hit_at']} {model['model_hit']:.4f} vs {model['hand_hit']:.4f}"
            if model["model_hit"] is not None and model["hand_hit"] is not None
            else ""
        )
        return (
            f"{trained}, labelled-pack {model['metric']} {model['model_figure']:.4f} vs "
            f"hand-set {model['hand_figure']:.4f}{hit} over {model['evaluated_packs']} packs "
            f"(not replayed), trained {model['trained_at']}"
        )
    return (
        f"{trained}; replayed out of fold on {model['replayed_queries']} queries, model vs "
        f"hand-set: hit@{model['hit_at']} {model['model_hit']:.4f} vs "
        f"{model['hand_hit']:.4f}, recall@{model['cut']} {model['model_recall']:.4f} vs "
        f"{model['hand_recall']:.4f}, mrr@{model['cut']} {model['model_figure']:.4f} vs "
        f"{model['hand_figure']:.4f}; trained {model['trained_at']}"
    )


def _check(guard: dict[str, Any], hit_at: int, cut: int) -> str:
    m, h = guard["model"], guard["hand"]
    return (
        f"on {m['queries']} queries with later feedback, model vs hand-set: "
        f"hit@{hit_at} {m['hit']:.4f} vs {h['hit']:.4f}, recall@{cut} {m['recall']:.4f} vs "
        f"{h['recall']:.4f}, mrr@{cut} {m['mrr']:.4f} vs {h['mrr']:.4f}"
    )


def _summary(command: str, result: dict[str, Any]) -> str:
    if command == "fit":
        verdict = (
            "activated: it serves now"
            if result["activated"]
            else f"not activated ({result['outcome']}): the hand-set ranking stays"
        )
        return f"model {result['model_id']}: {verdict}\n  {_figures(result)}"
    where = result["scope"] + (f" {result['project_id']}" if result["project_id"] else "")
    if command == "off":
        gone = result["disabled"]
        return (
            f"{where}: model {gone['model_id']} turned off; the hand-set ranking serves"
            if gone
            else f"{where}: no model was active; the hand-set ranking serves"
        )
    if command == "on":
        back = result["enabled"]
        return (
            f"{where}: model {back['model_id']} serves again; the serving check watches it "
            "from now on"
            if back
            else f"{where}: the serving check switched no model off; nothing changed"
        )
    active, last = result["active"], result["last_fit"]
    lines = [
        f"{where}: "
        + (
            f"model {active['model_id']} serves\n  {_figures(active)}"
            if active
            else "the hand-set ranking serves"
        )
    ]
    if stuck := result["unservable"]:
        lines.append(
            f"  model {stuck['model_id']} is stored as active but cannot serve "
            f"({stuck['not_served']}): a fit that activates replaces it, `vera rank off` clears it"
        )
    if (off := result["switched_off"]) and not (active and active["model_id"] == off["model_id"]):
        lines.append(
            f"  model {off['model_id']} was switched off {off['switched_off']['at']} by the "
            f"serving check, behind the hand-set ranking "
            f"{_check(off['switched_off'], off['hit_at'], off['cut'])}; `vera rank on` "
            "serves it again"
        )
    if last and (not active or last["model_id"] != active["model_id"]):
        lines.append(f"  last fit {last['model_id']}: {last['outcome']}; {_figures(last)}")
    lines.append(f"  contract {result['assembler_version']}")
    return "\n".join(lines)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from vera.stack.run_files import stack_client_settings

    settings = stack_client_settings(settings, (args.data_dir or settings.data_dir))
    project = args.project
    command = args.rank_command
    try:
        if command == "fit":
            result = asyncio.run(
                fit(settings, project=project, max_rows=args.max_rows, since=args.since)
            )
        elif command == "status":
            result = asyncio.run(status(settings, project=project))
        elif command == "on":
            result = asyncio.run(on(settings, project=project))
        else:
            result = asyncio.run(off(settings, project=project))
    except VeraError as exc:
        field = exc.metadata.get("field")
        print(
            f"vera rank {command}: failed ({exc.reason.lower()}"
            + (f", field {field}" if field else "")
            + ")"
            + (
                ""
                if exc.reason in _REFUSED
                else ". Is the stack running (scripts/up) with the same --data-dir?"
            ),
            file=sys.stderr,
        )
        return 2 if exc.reason in _REFUSED else 1
    print(json.dumps(result, sort_keys=True) if args.json else _summary(command, result))
    return 0


def main(args: argparse.Namespace) -> int:
    return run(args, settings_at(args.data_dir))
