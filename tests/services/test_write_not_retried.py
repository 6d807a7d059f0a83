"""No write is duplicated by a retry: the real knowledge service on PostgreSQL, reached
through the real internal channel (``vera.rpc.client.open_channel``) and a proxy that loses
replies. A proposal that committed but whose reply was lost (UNAVAILABLE) is not sent
again, and is stored once; a read through the same channel rides out the same outage."""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import asyncpg
import grpc
import pytest
from harness import knowledge_address, knowledge_settings

from vera.errors import Unavailable
from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.knowledge.v1 import knowledge_service_pb2_grpc as pb_grpc
from vera.rpc import retries
from vera.rpc.client import open_channel

PROPOSE = "/vera.knowledge.v1.KnowledgeService/ProposeFact"
REPORT = "/vera.knowledge.v1.KnowledgeService/GetProposalReport"
AGENT = str(uuid.uuid4())
PERSONAL = str(uuid.uuid4())


class LossyProxy(grpc.GenericRpcHandler):
    """Forwards raw calls to ``upstream``. ``lose_reply`` methods are forwarded, then answered
    UNAVAILABLE (the write committed, its reply was lost); ``refuse[method]`` calls are
    answered UNAVAILABLE before reaching upstream. Counts every call that arrived."""

    def __init__(self, upstream: grpc.aio.Channel) -> None:
        self._upstream = upstream
        self.lose_reply: set[str] = set()
        self.refuse: Counter[str] = Counter()
        self.arrived: Counter[str] = Counter()

    def service(self, handler_call_details):
        method = handler_call_details.method
        if method.startswith("/grpc.health.v1.Health/"):
            # Not forwarded (Watch streams): UNIMPLEMENTED, which a client's health check
            # takes as "serving" (vera.rpc.retries's healthCheckConfig).
            return None

        async def forward(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            self.arrived[method] += 1
            if self.refuse[method] > 0:
                self.refuse[method] -= 1
                await context.abort(grpc.StatusCode.UNAVAILABLE, "refused")
            reply = await self._upstream.unary_unary(method)(request, timeout=10)
            if method in self.lose_reply:
                await context.abort(grpc.StatusCode.UNAVAILABLE, "reply lost")
            return reply

        return grpc.unary_unary_rpc_method_handler(forward)


@contextlib.asynccontextmanager
async def lossy_knowledge(
    dsn: str,
) -> AsyncIterator[tuple[LossyProxy, pb_grpc.KnowledgeServiceStub]]:
    async with knowledge_address(knowledge_settings(dsn)) as address:
        upstream = grpc.aio.insecure_channel(address)
        proxy = LossyProxy(upstream)
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((proxy,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        channel = open_channel(f"127.0.0.1:{port}", deadline_seconds=10)
        try:
            yield proxy, pb_grpc.KnowledgeServiceStub(channel)
        finally:
            await channel.close()
            await server.stop(0)
            await upstream.close()


def proposal(object_: str) -> pb.ProposeFactRequest:
    return pb.ProposeFactRequest(
        principal_id=AGENT,
        personal_scope_id=PERSONAL,
        readable_scope_ids=[PERSONAL],
        subject="ledger-api",
        predicate="deploys_to",
        object=object_,
        context=pb.TaskContext(runtime="claude-code", task_ref="t-retry"),
    )


async def test_a_write_whose_reply_was_lost_is_stored_once(pg_dsn: str) -> None:
    async with lossy_knowledge(pg_dsn) as (proxy, knowledge):
        proxy.lose_reply.add(PROPOSE)
        with pytest.raises(Unavailable):
            await knowledge.ProposeFact(proposal("eu-west cluster"))
        assert proxy.arrived[PROPOSE] == 1

        # A read meeting the same outage is retried through to an answer, and the answer
        # shows the one write that committed.
        proxy.refuse[REPORT] = retries.MAX_ATTEMPTS - 1
        report = await knowledge.GetProposalReport(
            pb.GetProposalReportRequest(
                principal_id=AGENT,
                context=pb.TaskContext(task_ref="t-retry"),
                page_size=10,
            )
        )
        assert proxy.arrived[REPORT] == retries.MAX_ATTEMPTS
        assert len(report.attempts) == 1

    conn = await asyncpg.connect(pg_dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM knowledge.proposal_attempts") == 1
        assert await conn.fetchval("SELECT count(*) FROM knowledge.facts") == 1
    finally:
        await conn.close()
