"""How long the console's review queue takes with a thousand pending proposals.

    scripts/bench console [--proposals N] [--requests N]

Starts ``vera up`` (local mode) in a temporary data dir, files N proposals (default 1,000)
to one project through knowledge's ProposeFact (the RPC behind the MCP tool, without the
tool's quota), signs in from ``console_url`` as a browser would, then times GET of the
queue's first page (50 proposals, the count of all N, the conflicted attempts) end to end
over HTTP: the curator check, the knowledge RPCs, the template. Prints p50/p95 in ms.
A benchmark, not a test: the figure goes in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

import httpx

from bench import record
from bench.harness import running_stack
from bench.metrics import percentile

PROJECT = "console-bench"


async def file_proposals(data_dir: Path, count: int) -> str:
    """N pending proposals addressed to the bench project; returns its id."""
    from vera.config import Settings
    from vera.identity.v1 import identity_pb2 as ipb
    from vera.identity.v1.identity_pb2_grpc import IdentityServiceStub
    from vera.knowledge.v1 import knowledge_service_pb2 as kpb
    from vera.knowledge.v1.knowledge_service_pb2_grpc import KnowledgeServiceStub
    from vera.rpc.client import open_channel
    from vera.stack.run_files import stack_client_settings

    settings = stack_client_settings(Settings(), data_dir)
    key = settings.rpc.auth_key
    identity_channel = open_channel(settings.services.identity, 30.0, auth_key=key)
    knowledge_channel = open_channel(settings.services.knowledge, 30.0, auth_key=key)
    try:
        identity = IdentityServiceStub(identity_channel)
        knowledge = KnowledgeServiceStub(knowledge_channel)
        principal = (await identity.EnsureLocalPrincipal(ipb.EnsureLocalPrincipalRequest(
            principal_id=str(settings.mcp.local_principal_id)))).principal
        project = (await identity.EnsureProject(ipb.EnsureProjectRequest(
            principal_id=principal.principal_id, slug=PROJECT))).project
        for i in range(count):
            await knowledge.ProposeFact(kpb.ProposeFactRequest(
                principal_id=principal.principal_id,
                personal_scope_id=principal.personal_scope_id,
                readable_scope_ids=[principal.personal_scope_id, project.project_id],
                target_scope_id=project.project_id,
                subject=f"service-{i:04d}", predicate="depends_on", object=f"store-{i % 37}",
                evidence_text=f"services/service-{i:04d}/config.yaml names store-{i % 37}",
                context=kpb.TaskContext(runtime="claude-code", task_ref=f"task-{i}",
                                        repository_ref="github.com/acme/platform")))
        return project.project_id
    finally:
        await identity_channel.close()
        await knowledge_channel.close()


def time_queue(console_url: str, project_id: str, requests: int) -> list[float]:
    samples = []
    with httpx.Client(timeout=30.0, follow_redirects=True) as browser:
        signed = browser.get(console_url)  # follows the sign-in redirect, keeps the cookie
        signed.raise_for_status()
        base = console_url.split("/console/")[0]
        url = f"{base}/console/projects/{project_id}/"
        for _ in range(requests):
            t0 = time.perf_counter()
            page = browser.get(url)
            samples.append((time.perf_counter() - t0) * 1000)
            page.raise_for_status()
            if 'data-count="pending"' not in page.text:
                raise RuntimeError("the queue page did not render its count")
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench console", description=__doc__)
    parser.add_argument("--proposals", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args(argv)
    wall = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="vera-bench-console-") as tmp, \
            running_stack(Path(tmp)) as (_, data_dir, _env):
        project_id = asyncio.run(file_proposals(data_dir, args.proposals))
        console_url = json.loads((data_dir / "run" / "stack.json").read_text())["console_url"]
        samples = time_queue(console_url, project_id, args.requests)
    print(f"console queue page, {args.proposals} pending, {args.requests} requests: "
          f"p50 {percentile(samples, 50):.1f} ms, p95 {percentile(samples, 95):.1f} ms")
    record.write("console", argv or [], [record.table(
        [f"queue's first page, {args.proposals:,} pending", "requests", "p50 ms", "p95 ms"],
        [["GET over HTTP", len(samples), percentile(samples, 50), percentile(samples, 95)]],
        digits=[None, 0, 1, 1])], wall_s=time.perf_counter() - wall)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
