"""Internal channels retry reads on UNAVAILABLE, a bounded number of times inside the call's
deadline, and never retry a write or another status (fault-injecting servers; the real
knowledge service behind a reply-losing proxy is tests/services/test_write_not_retried.py)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from vera.errors import InvalidInput, Unavailable, VeraError
from vera.identity.v1 import identity_pb2
from vera.knowledge.v1 import knowledge_service_pb2
from vera.retrieval.v1 import retrieval_pb2, retrieval_pb2_grpc
from vera.rpc import retries
from vera.rpc.client import open_channel
from vera.rpc.server import ServiceBinding, create_server, mark_serving
from vera.snapshot.v1 import snapshot_pb2
from vera.snapshot.v1 import snapshot_pb2_grpc as snapshot_grpc

OUTAGE = "injected_outage"


class Flaky(retrieval_pb2_grpc.RetrievalServiceServicer, snapshot_grpc.SnapshotServiceServicer):
    """Answers UNAVAILABLE to the first ``failures[method]`` calls of a method, then serves;
    counts every attempt that reached it."""

    def __init__(self) -> None:
        self.failures: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()

    def _attempt(self, method: str) -> None:
        self.attempts[method] += 1
        if self.failures[method] > 0:
            self.failures[method] -= 1
            raise Unavailable("injected", reason=OUTAGE)

    async def Search(self, request, context):
        self._attempt("Search")
        if request.query == "invalid":
            raise InvalidInput("query")
        if request.query == "crash":
            raise RuntimeError("a bug, not an outage")
        return retrieval_pb2.SearchResponse(assembler_version="asm-1")

    async def CreateContextPack(self, request, context):
        self._attempt("CreateContextPack")
        return snapshot_pb2.CreateContextPackResponse()


@pytest.fixture
async def flaky():
    servicer = Flaky()
    running = create_server(
        [
            ServiceBinding(
                "vera.retrieval.v1.RetrievalService",
                servicer,
                retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server,
            ),
            ServiceBinding(
                "vera.snapshot.v1.SnapshotService",
                servicer,
                snapshot_grpc.add_SnapshotServiceServicer_to_server,
            ),
        ],
        "127.0.0.1:0",
    )
    await running.server.start()
    await mark_serving(running)
    channel = open_channel(f"127.0.0.1:{running.port}", deadline_seconds=10)
    yield (
        servicer,
        retrieval_pb2_grpc.RetrievalServiceStub(channel),
        snapshot_grpc.SnapshotServiceStub(channel),
    )
    await channel.close()
    await running.stop(0)


async def test_a_read_succeeds_after_transient_unavailable(flaky):
    servicer, retrieval, _ = flaky
    servicer.failures["Search"] = retries.MAX_ATTEMPTS - 1
    response = await retrieval.Search(retrieval_pb2.SearchRequest(query="q"))
    assert response.assembler_version == "asm-1"
    assert servicer.attempts["Search"] == retries.MAX_ATTEMPTS


async def test_a_read_gives_up_after_max_attempts_with_the_servers_error(flaky):
    servicer, retrieval, _ = flaky
    servicer.failures["Search"] = 1000
    with pytest.raises(Unavailable) as raised:
        await retrieval.Search(retrieval_pb2.SearchRequest(query="q"), timeout=10)
    # The server's own last answer (its ErrorInfo), not the deadline running out.
    assert raised.value.metadata["reason"] == OUTAGE
    assert servicer.attempts["Search"] == retries.MAX_ATTEMPTS


async def test_the_deadline_bounds_the_retries(flaky):
    servicer, retrieval, _ = flaky
    servicer.failures["Search"] = 1000
    with pytest.raises(Unavailable):
        await retrieval.Search(retrieval_pb2.SearchRequest(query="q"), timeout=0.05)
    attempted = servicer.attempts["Search"]
    # Once the deadline has passed, no further attempt is made.
    await asyncio.sleep(2 * retries.MAX_BACKOFF_SECONDS)
    assert servicer.attempts["Search"] == attempted >= 1


@pytest.mark.parametrize(("query", "error"), [("invalid", InvalidInput), ("crash", VeraError)])
async def test_a_read_is_not_retried_on_other_statuses(flaky, query, error):
    servicer, retrieval, _ = flaky
    with pytest.raises(error):
        await retrieval.Search(retrieval_pb2.SearchRequest(query=query))
    assert servicer.attempts["Search"] == 1


async def test_a_write_that_met_unavailable_is_not_retried(flaky):
    servicer, _, snapshot = flaky
    servicer.failures["CreateContextPack"] = 1
    with pytest.raises(Unavailable):
        await snapshot.CreateContextPack(snapshot_pb2.CreateContextPackRequest())
    assert servicer.attempts["CreateContextPack"] == 1


def _methods(service_descriptor) -> set[str]:
    return {m.name for m in service_descriptor.methods}


SERVICES = {
    service.full_name: service
    for module in (identity_pb2, knowledge_service_pb2, retrieval_pb2, snapshot_pb2)
    for service in module.DESCRIPTOR.services_by_name.values()
}
# Verbs of methods that change state: none may be on the retry list.
WRITE_VERBS = (
    "Accept", "Attach", "Begin", "Charge", "Complete", "Correct", "Create", "Decline",
    "Derive", "Disable", "Enable", "Ensure", "Erase", "Fit", "Ingest", "Map", "Propose", "Record",
    "Reject", "Release", "Remove", "Retract", "Revoke", "Set", "Verify",
)  # fmt: skip


def test_the_retry_list_names_real_read_methods_only():
    assert set(retries.READ_METHODS) == set(SERVICES)
    for service, methods in retries.READ_METHODS.items():
        # gRPC refuses a service config naming a method twice: no channel at all.
        assert len(methods) == len(set(methods)), service
        assert set(methods) <= _methods(SERVICES[service]), service
        assert not [m for m in methods if m.startswith(WRITE_VERBS)], service
    # Every method is either a read on the list or a write by its verb: a new method
    # must be placed on one side.
    for service, descriptor in SERVICES.items():
        for method in _methods(descriptor):
            listed = method in retries.READ_METHODS[service]
            assert listed != method.startswith(WRITE_VERBS), f"{service}/{method}"


def test_the_policy_retries_only_unavailable_a_bounded_number_of_times():
    [method_config] = retries.service_config()["methodConfig"]
    policy = method_config["retryPolicy"]
    assert policy["retryableStatusCodes"] == ["UNAVAILABLE"]
    assert 2 <= policy["maxAttempts"] <= 5
    assert float(policy["maxBackoff"].rstrip("s")) <= 1.0
    assert retries.service_config()["retryThrottling"]["maxTokens"] > 0
