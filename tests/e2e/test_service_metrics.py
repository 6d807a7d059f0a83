"""Every gRPC service of the real stack (`vera up`) serves its own metrics: calls per
service, method and code, pool saturation, and its own gauges, with bounded labels only."""

from __future__ import annotations

import json

import httpx
import pytest
from harness import chart_metric_names
from prometheus_client.parser import text_string_to_metric_families

from vera.commands import SERVICE_NAMES
from vera.stack.run_files import read_stack_file

pytestmark = pytest.mark.e2e

# Every label a service's sample may carry: fixed names, registered methods and the gRPC
# codes, never anything a caller sent.
LABELS = {"grpc_service", "grpc_method", "grpc_code", "pool", "le"}
GRPC_CODES = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED",
}


def samples(url: str) -> list:
    body = httpx.get(url, timeout=10).text
    return [s for family in text_string_to_metric_families(body) for s in family.samples]


def value(found: list, name: str, **labels: str) -> float | None:
    for sample in found:
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
            return sample.value
    return None


async def test_each_service_counts_its_calls_and_reports_its_state(stack, tmp_path):
    facts = tmp_path / "deploys.jsonl"
    facts.write_text(json.dumps({
        "type": "fact", "subject": "billing-api", "predicate": "deploys_to",
        "object": "the us-east-2 cluster through Argo CD"}) + "\n")
    loaded = stack.vera("ingest", str(facts), "--project", "metrics", "--data-dir",
                        str(stack.data_dir))
    assert loaded.returncode == 0, loaded.stderr
    async with stack.mcp_client() as client:
        result = await client.call_tool(
            "knowledge_get_context", {"query": "how do we deploy", "project": "metrics"})
        assert not result.is_error, result.content
    urls = read_stack_file(stack.data_dir)["service_metrics"]
    assert set(urls) == set(SERVICE_NAMES)
    scraped = {name: samples(url) for name, url in urls.items()}
    for name, found in scraped.items():
        for sample in found:
            assert set(sample.labels) <= LABELS, (name, sample)
            assert sample.labels.get("grpc_code", "OK") in GRPC_CODES
        assert value(found, "vera_db_pool_max_connections", pool=name) is not None, name
        assert value(found, "vera_db_pool_connections_in_use", pool=name) is not None, name
    retrieval = scraped["retrieval"]
    assert value(
        retrieval, "vera_grpc_server_handled_total",
        grpc_service="vera.retrieval.v1.RetrievalService", grpc_method="AssembleContext",
        grpc_code="OK") >= 1
    assert value(
        retrieval, "vera_grpc_server_handling_seconds_count",
        grpc_service="vera.retrieval.v1.RetrievalService", grpc_method="AssembleContext") >= 1
    assert value(retrieval, "vera_retrieval_index_lag_changes") is not None
    assert value(retrieval, "vera_retrieval_rank_switch_offs_total") == 0
    knowledge = scraped["knowledge"]
    pending = value(knowledge, "vera_knowledge_proposals_pending")
    oldest = value(knowledge, "vera_knowledge_proposal_oldest_age_seconds")
    assert pending is not None and oldest is not None and pending >= 0 and oldest >= 0
    assert pending > 0 or oldest == 0
    # Retrieval reads knowledge's facts and change log: those calls are knowledge's.
    assert any(
        s.name == "vera_grpc_server_handled_total"
        and s.labels["grpc_service"] == "vera.knowledge.v1.KnowledgeService"
        for s in knowledge
    )


def test_every_metric_the_chart_alerts_and_dashboards_name_is_exported(stack):
    """The rules and dashboards (charts/vera/files) read only series a stack serves."""
    urls = [f"http://127.0.0.1:{stack.env['VERA_OBSERVABILITY__MCP_METRICS_PORT']}/metrics",
            *read_stack_file(stack.data_dir)["service_metrics"].values()]
    exported = {sample.name for url in urls for sample in samples(url)}
    named = chart_metric_names()
    assert "vera_grpc_server_handled_total" in named and "vera_audit_records" in named
    assert named - exported == set()
