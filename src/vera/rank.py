"""`vera rank fit|status|off`: the learned ranking stage's operator commands, a thin client
of the retrieval service (FitRankModel, GetRankStatus, DisableRankModel).

The deployment-wide model is the default (``--all``); ``--project`` names a project (slug
or id) the local principal reads, resolved through identity. A fit trains only on
result-level feedback whose signal vector the server produced, and activates its model
only when, out of fold, it is no worse than the hand-set ranking at the top (hit@5) and
beats its MRR (learned_rank.verdict); ``status`` says what serves and why, including a
model stored as active that this release cannot serve.
Exit codes: 0 done (also a fit that did not activate), 1 the stack could not be reached
or failed, 2 refused.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from vera.config import Settings
from vera.errors import VeraError
from vera.retrieval.v1 import retrieval_pb2

# Refusals: the request was understood and declined; anything else is a failure to reach
# or run the stack.
_REFUSED = frozenset({"INVALID_INPUT", "NOT_FOUND", "PROJECT_OUT_OF_SCOPE", "AMBIGUOUS_PROJECT"})
OUTCOMES = {
    retrieval_pb2.RANK_FIT_OUTCOME_ACTIVATED: "activated",
    retrieval_pb2.RANK_FIT_OUTCOME_TOO_LITTLE_FEEDBACK: "too_little_feedback",
    retrieval_pb2.RANK_FIT_OUTCOME_ONE_SIDED_FEEDBACK: "one_sided_feedback",
    retrieval_pb2.RANK_FIT_OUTCOME_NOT_BETTER: "not_better",
    retrieval_pb2.RANK_FIT_OUTCOME_WORSE_AT_TOP: "worse_at_top",
}
NOT_SERVED = {
    retrieval_pb2.RANK_NOT_SERVED_REASON_FITTED_ON_OTHER_FEATURES: "fitted_on_other_features",
}


def add_parser(commands: argparse._SubParsersAction) -> None:
    rank = commands.add_parser("rank", help="the learned ranking stage: fit, status, off")
    sub = rank.add_subparsers(dest="rank_command", required=True)
    for name, help_text in (
        (
            "fit",
            "train on recorded feedback; activate only if, out of fold, it is no worse than the"
            " hand-set ranking at hit@5 and beats its MRR",
        ),
        ("status", "the active model and the last fit, with their out-of-fold figures"),
        ("off", "deactivate the model: the hand-set ranking serves the next call"),
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
        "not_served": NOT_SERVED.get(model.not_served_reason),
        "trained_at": model.trained_at.ToDatetime().isoformat() + "Z",
        "assembler_version": model.assembler_version,
    }


class _Stack:
    """Channels to the stack's identity and retrieval services for one command."""

    def __init__(self, settings: Settings) -> None:
        from vera.rpc.client import open_channel

        key = settings.rpc.auth_key
        self._settings = settings
        self._identity = open_channel(
            settings.services.identity, settings.rpc.deadline_seconds, auth_key=key, caller="cli"
        )
        # A fit reads every feedback row and trains: the longer (retrieval) deadline.
        self._retrieval = open_channel(
            settings.services.retrieval,
            settings.rpc.retrieval_deadline_seconds,
            auth_key=key,
            caller="cli",
        )

    async def __aenter__(self) -> _Stack:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._identity.close()
        await self._retrieval.close()

    @property
    def retrieval(self) -> Any:
        from vera.retrieval.v1 import retrieval_pb2_grpc

        return retrieval_pb2_grpc.RetrievalServiceStub(self._retrieval)

    async def scope(self, project: str | None) -> str:
        """'' for the deployment-wide model; else the project's id, resolved as the local
        principal (the feedback the caller may read)."""
        if not project:
            return ""
        from vera.identity.v1 import identity_pb2, identity_pb2_grpc

        stub = identity_pb2_grpc.IdentityServiceStub(self._identity)
        resolved = await stub.ResolveProject(
            identity_pb2.ResolveProjectRequest(
                principal_id=str(self._settings.mcp.local_principal_id), project=project
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

    async with _Stack(settings) as stack:
        response = await stack.retrieval.FitRankModel(
            retrieval_pb2.FitRankModelRequest(
                scope_id=await stack.scope(project),
                max_rows=max_rows,
                recorded_after=to_timestamp(since),
            )
        )
    fitted = _model(response.model, True)
    assert fitted is not None
    return fitted


async def status(settings: Settings, *, project: str | None = None) -> dict[str, Any]:
    async with _Stack(settings) as stack:
        scope = await stack.scope(project)
        response = await stack.retrieval.GetRankStatus(
            retrieval_pb2.GetRankStatusRequest(scope_id=scope)
        )
    return {
        "scope": "project" if scope else "deployment",
        "project_id": scope,
        "active": _model(response.active, response.HasField("active")),
        "unservable": _model(response.unservable, response.HasField("unservable")),
        "last_fit": _model(response.last_fit, response.HasField("last_fit")),
        "assembler_version": response.assembler_version,
    }


async def off(settings: Settings, *, project: str | None = None) -> dict[str, Any]:
    async with _Stack(settings) as stack:
        scope = await stack.scope(project)
        response = await stack.retrieval.DisableRankModel(
            retrieval_pb2.DisableRankModelRequest(scope_id=scope)
        )
    return {
        "scope": "project" if scope else "deployment",
        "project_id": scope,
        "disabled": _model(response.disabled, response.HasField("disabled")),
        "assembler_version": response.assembler_version,
    }


def _figures(model: dict[str, Any]) -> str:
    hit = (
        f", hit@{model['hit_at']} {model['model_hit']:.4f} vs {model['hand_hit']:.4f}"
        if model["model_hit"] is not None and model["hand_hit"] is not None
        else ""
    )
    return (
        f"{model['training_rows']} rows, {model['training_queries']} queries, "
        f"out-of-fold {model['metric']} {model['model_figure']:.4f} vs hand-set "
        f"{model['hand_figure']:.4f}{hit} over {model['evaluated_packs']} packs, "
        f"trained {model['trained_at']}"
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
    if last and (not active or last["model_id"] != active["model_id"]):
        lines.append(f"  last fit {last['model_id']}: {last['outcome']}; {_figures(last)}")
    lines.append(f"  contract {result['assembler_version']}")
    return "\n".join(lines)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from vera.stack import stack_client_settings

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
