"""Where a get_context call's time goes: each hop timed on its own against a live stack.

    scripts/bench hops [--conversations N] [--questions N]

Starts ``vera up`` in a temporary data dir, ingests the first N LoCoMo conversations, then
times the same questions as: the MCP calls (``knowledge_get_context``, ``knowledge_search``)
end to end, and each gRPC hop behind them called directly (identity ResolveProject,
retrieval AssembleContext and Search, knowledge BatchGetFacts of a context's keys). The
difference between the MCP call and its hops is the gateway's own cost (HTTP, MCP JSON,
auth, quota, rendering). A diagnostic, not a test: it prints p50/p95 per hop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench import locomo, record
from bench.harness import DEFAULT_DATA, LIMIT, TOKEN_BUDGET, ingest_all, running_stack
from bench.metrics import percentile

if TYPE_CHECKING:
    from vera.stack.launcher import LaunchedStack


async def _timed(samples: dict[str, list[float]], name: str, call):
    t0 = time.perf_counter()
    result = await call
    samples.setdefault(name, []).append((time.perf_counter() - t0) * 1000)
    return result


async def measure(stack: LaunchedStack, data_dir: Path, conversations: list[locomo.Conversation],
                  questions: int) -> dict[str, list[float]]:

    from vera.config import Settings
    from vera.identity.v1 import identity_pb2
    from vera.knowledge.v1 import knowledge_service_pb2 as knowledge_pb2
    from vera.retrieval.v1 import retrieval_pb2
    from vera.rpc.client import open_channel
    from vera.services.retrieval.pipeline.retriever import REREAD_MIN
    from vera.stack.run_files import stack_client_settings

    info = json.loads((data_dir / "run" / "stack.json").read_text())
    services = info["services"]
    key = stack_client_settings(Settings(), data_dir).rpc.auth_key  # the run's rpc.key
    channels = {name: open_channel(services[name], 30.0, auth_key=key) for name in services}
    from vera.identity.v1.identity_pb2_grpc import IdentityServiceStub
    from vera.knowledge.v1.knowledge_service_pb2_grpc import KnowledgeServiceStub
    from vera.retrieval.v1.retrieval_pb2_grpc import RetrievalServiceStub

    identity = IdentityServiceStub(channels["identity"])
    knowledge = KnowledgeServiceStub(channels["knowledge"])
    retrieval = RetrievalServiceStub(channels["retrieval"])
    principal = str(Settings().mcp.local_principal_id)
    samples: dict[str, list[float]] = {}
    try:
        async with stack.mcp_client() as client:
            conv = conversations[0]
            for tool in ("knowledge_get_context", "knowledge_search"):  # warm-up
                await client.call_tool(tool, {"query": "warm up", "project": conv.project})
            for conv in conversations:
                for q in conv.questions[:questions]:
                    args = {"query": q.question, "project": conv.project, "limit": LIMIT}
                    await _timed(samples, "MCP get_context", client.call_tool(
                        "knowledge_get_context", {**args, "token_budget": TOKEN_BUDGET}))
                    await _timed(samples, "MCP search", client.call_tool(
                        "knowledge_search", args))
                    project = (await _timed(samples, "identity.ResolveProject",
                                            identity.ResolveProject(
                        identity_pb2.ResolveProjectRequest(
                            principal_id=principal, project=conv.project)))).project
                    await _timed(samples, "identity.ResolveScopes", identity.ResolveScopes(
                        identity_pb2.ResolveScopesRequest(principal_id=principal)))
                    assembled = await _timed(
                        samples, "retrieval.AssembleContext", retrieval.AssembleContext(
                            retrieval_pb2.AssembleContextRequest(
                                scope_id=project.project_id, query=q.question, limit=LIMIT,
                                token_budget=TOKEN_BUDGET)))
                    await _timed(samples, "retrieval.Search", retrieval.Search(
                        retrieval_pb2.SearchRequest(scope_ids=[project.project_id],
                                                    query=q.question, limit=LIMIT)))
                    keys = [r.fact.fact_key for r in assembled.results]
                    keys = (keys * (REREAD_MIN // max(1, len(keys)) + 1))[:REREAD_MIN]
                    await _timed(samples, "knowledge.BatchGetFacts", knowledge.BatchGetFacts(
                        knowledge_pb2.BatchGetFactsRequest(
                            scope_ids=[project.project_id], fact_keys=keys)))
    finally:
        for channel in channels.values():
            await channel.close()
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench hops", description=__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=1)
    parser.add_argument("--questions", type=int, default=60)
    args = parser.parse_args(argv)
    wall = time.perf_counter()
    conversations = locomo.load(args.data)[: args.conversations]
    with tempfile.TemporaryDirectory(prefix="vera-hops-") as tmp:
        root = Path(tmp)
        with running_stack(root) as (stack, data_dir, env):
            ingest_all(conversations, root, data_dir, env, [])
            samples = asyncio.run(measure(stack, data_dir, conversations, args.questions))
    rows = [[name, len(values), percentile(values, 50), percentile(values, 95)]
            for name, values in samples.items()]
    figures = record.table(["hop", "n", "p50 ms", "p95 ms"], rows, digits=[None, 0, 1, 1])
    print("\n".join(record.as_markdown(figures)))
    record.write("hops", argv or [], [figures], wall_s=time.perf_counter() - wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
