"""Snapshot creation reads a scope's change log page by page and keeps only what the
snapshot stores: freezing a log far larger than a page grows the process by a fraction
of the log, and the last entry of each version decides whether it counts."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import UTC, datetime

from vera.knowledge.v1 import knowledge_service_pb2 as pb
from vera.knowledge.v1 import knowledge_service_pb2_grpc as pb_grpc
from vera.rpc.client import open_channel
from vera.rpc.server import ServiceBinding, create_server
from vera.services.snapshot.fact_log import KnowledgeFactLog

SCOPE = "7f0c9a52-93b5-4a55-9f7a-6d2f3c1e0b11"
KNOWLEDGE = "vera.knowledge.v1.KnowledgeService"

# One process: a stand-in knowledge service that makes each page of a large log when it
# is asked for (so the server holds one page at a time) and the real fact log reading
# it. Prints the growth of the process's peak RSS while freezing, in MiB.
_FREEZE_A_LARGE_LOG = textwrap.dedent(f"""
    import asyncio, resource
    from datetime import UTC, datetime
    from google.protobuf.timestamp_pb2 import Timestamp
    from vera.knowledge.v1 import knowledge_service_pb2 as pb
    from vera.knowledge.v1 import knowledge_service_pb2_grpc as pb_grpc
    from vera.rpc.client import open_channel
    from vera.rpc.server import ServiceBinding, create_server
    from vera.services.snapshot.fact_log import KnowledgeFactLog

    VERSIONS, EVIDENCE = 24_000, "e" * 3000  # about 72 MB of log
    RECORDED = Timestamp(seconds=1_700_000_000)

    class Log(pb_grpc.KnowledgeServiceServicer):
        async def ListChanges(self, request, context):
            first = request.after_position + 1
            last = min(first + request.page_size, VERSIONS + 1)
            return pb.ListChangesResponse(head_position=VERSIONS, changes=[
                pb.Change(position=n, kind=pb.CHANGE_KIND_FACT_UPSERTED, fact=pb.Fact(
                    fact_key=f"k{{n}}", version_id=f"v{{n}}", scope_id="{SCOPE}",
                    state=pb.FACT_STATE_ACTIVE, recorded_at=RECORDED,
                    citations=[pb.Citation(source_id="adr-1", excerpt=EVIDENCE)]))
                for n in range(first, last)])

    def peak_mib():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    async def main():
        running = create_server([ServiceBinding("{KNOWLEDGE}", Log(),
                                pb_grpc.add_KnowledgeServiceServicer_to_server)], "127.0.0.1:0")
        await running.server.start()
        channel = open_channel(f"127.0.0.1:{{running.port}}", 60)
        log, now = KnowledgeFactLog(channel), datetime.now(UTC)
        await pb_grpc.KnowledgeServiceStub(channel).ListChanges(
            pb.ListChangesRequest(after_position=0, page_size=1000))  # warm: one page
        before = peak_mib()
        freeze = await log.active_facts("{SCOPE}", now, now)
        assert len(freeze.facts) == VERSIONS and freeze.change_position == VERSIONS
        print(round(peak_mib() - before))
        await channel.close()
        await running.stop(0)

    asyncio.run(main())
""")


def test_freezing_a_log_far_larger_than_a_page_holds_a_fraction_of_it() -> None:
    done = subprocess.run([sys.executable, "-c", _FREEZE_A_LARGE_LOG], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    growth_mib = int(done.stdout.strip().splitlines()[-1])
    # Holding the log's facts grows the process by more than the log's ~70 MB (73 MiB
    # measured before the fold); a page at a time plus the records, by under 30.
    assert growth_mib < 45, growth_mib


class _Log(pb_grpc.KnowledgeServiceServicer):
    """A two-page log in which versions change state on a later page."""

    def __init__(self, changes: list[pb.Change]) -> None:
        self._changes = changes

    async def ListChanges(self, request, context):
        after = [c for c in self._changes if c.position > request.after_position]
        return pb.ListChangesResponse(changes=after[: request.page_size],
                                      head_position=self._changes[-1].position)


def _change(position: int, version: str, state: int, superseded: bool = False) -> pb.Change:
    fact = pb.Fact(fact_key=f"key-{version}", version_id=version, scope_id=SCOPE, state=state,
                   citations=[pb.Citation(source_id=f"src-{version}")])
    fact.recorded_at.FromDatetime(datetime(2024, 1, 1, tzinfo=UTC))
    if superseded:
        fact.superseded_at.FromDatetime(datetime(2024, 6, 1, tzinfo=UTC))
    return pb.Change(position=position, kind=pb.CHANGE_KIND_FACT_UPSERTED, fact=fact)


async def test_the_last_entry_of_a_version_decides_across_pages(monkeypatch) -> None:
    monkeypatch.setattr("vera.services.snapshot.fact_log.PAGE_SIZE", 2)
    changes = [
        _change(1, "a", pb.FACT_STATE_ACTIVE),
        _change(2, "b", pb.FACT_STATE_PROPOSED),
        _change(3, "c", pb.FACT_STATE_ACTIVE),
        _change(4, "a", pb.FACT_STATE_SUPERSEDED, superseded=True),  # gone by now
        _change(5, "b", pb.FACT_STATE_RETRACTED),
        _change(6, "d", pb.FACT_STATE_RETRACTED),
        _change(7, "d", pb.FACT_STATE_ACTIVE),  # back again
    ]
    running = create_server([ServiceBinding(KNOWLEDGE, _Log(changes),
                                            pb_grpc.add_KnowledgeServiceServicer_to_server)],
                            "127.0.0.1:0")
    await running.server.start()
    channel = open_channel(f"127.0.0.1:{running.port}", 10)
    try:
        now = datetime.now(UTC)
        freeze = await KnowledgeFactLog(channel).active_facts(SCOPE, now, now)
    finally:
        await channel.close()
        await running.stop(0)
    assert [f.version_id for f in freeze.facts] == ["c", "d"]
    assert [f.source_ids for f in freeze.facts] == [("src-c",), ("src-d",)]
    assert freeze.change_position == 7
