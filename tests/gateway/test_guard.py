"""The guard's order (authorize -> bounds -> quota -> body): refused and invalid calls use
no quota, quotas are per bucket, and every failure is a structured protocol error; the
refusals reach identity's audit trail as counts (RecordRefusals)."""

from __future__ import annotations

from collections import Counter

from harness import mcp_client, without_ids

from vera.gateway.auth import AuthClass, Caller


def reported(fakes) -> Counter[tuple[str, str]]:
    """The refusals the gateway reported to identity, summed over its reports."""
    counts: Counter[tuple[str, str]] = Counter()
    for report in fakes.rec.requests.get("RecordRefusals", []):
        assert report.source == "gateway"
        for c in report.counts:
            counts[(c.action, c.reason)] += c.count
    return counts


class ReadOnly:
    """A credential that holds only the READ class (as a memory:read-only token would)."""

    async def authenticate(self, request, backends):
        return Caller(
            "11111111-1111-4111-8111-111111111111",
            frozenset({AuthClass.READ}),
            "remote-authenticated",
        )


async def test_quota_counts_only_calls_that_pass_bounds(
    start_gateway, frozen_clock, call_error, fakes
):
    fakes.rec.requests.pop("RecordRefusals", None)  # the fakes outlive each test
    gateway = start_gateway(clock=frozen_clock, quota_read_per_minute=2, quota_context_per_minute=1)
    async with gateway as gw, mcp_client(gw.url) as client:
        for _ in range(3):
            error = await call_error(client, "knowledge_search", {"query": "q", "limit": 0})
            assert error.data["code"] == "invalid_input"
        # Invalid calls used nothing: the full read budget is still there.
        for _ in range(2):
            assert not (await client.call_tool("knowledge_search", {"query": "q"})).is_error
        error = await call_error(client, "knowledge_search", {"query": "q"})
        assert error.code == -32003
        assert error.data["code"] == "quota_exceeded"
        assert error.data["bucket"] == "read"
        assert 1 <= error.data["retry_after_seconds"] <= 60
        # Buckets are independent: context has its own budget of one.
        assert not (await client.call_tool("knowledge_get_context", {"query": "q"})).is_error
        error = await call_error(client, "knowledge_get_context", {"query": "q"})
        assert error.data["bucket"] == "context"
        # Each refusal counted per bucket (the quota-refusal alert reads this series).
        registry = gw.app.state.metrics.registry
        assert [registry.get_sample_value("vera_mcp_quota_refusals_total", {"bucket": b})
                for b in ("read", "context", "propose")] == [1, 1, 0]
        # propose and retract share the propose bucket, untouched so far.
        assert not (
            await client.call_tool(
                "knowledge_propose", {"subject": "s", "predicate": "p", "object": "o"}
            )
        ).is_error
    # Reported when the gateway stops (and each interval before): counts, never calls.
    assert reported(fakes) == {("quota.refused", "read"): 1, ("quota.refused", "context"): 1}


async def test_fixed_window_refills_in_the_next_window(start_gateway, call_error):
    now = [1_700_000_010.0]
    gateway = start_gateway(clock=lambda: now[0], quota_feedback_per_minute=1)
    async with gateway as gw, mcp_client(gw.url) as client:
        pack = (
            await client.call_tool("knowledge_get_context", {"query": "q", "persist": True})
        ).structured_content
        args = {"context_pack_id": pack["pack_id"], "result_ref": "ref-1", "signal": "up"}
        assert not (await client.call_tool("knowledge_feedback", args)).is_error
        assert (await call_error(client, "knowledge_feedback", args)).data["bucket"] == "feedback"
        now[0] += 60
        assert not (await client.call_tool("knowledge_feedback", args)).is_error


async def test_quota_can_be_disabled(start_gateway):
    gateway = start_gateway(quota_enabled=False, quota_read_per_minute=1)
    async with gateway as gw, mcp_client(gw.url) as client:
        for _ in range(3):
            assert not (await client.call_tool("knowledge_search", {"query": "q"})).is_error


async def test_read_only_credential_cannot_write_and_refusals_use_no_quota(
    start_gateway, frozen_clock, call_error, fakes
):
    fakes.rec.requests.pop("RecordRefusals", None)
    gateway = start_gateway(
        authenticator=ReadOnly(), clock=frozen_clock, quota_context_per_minute=1
    )
    async with gateway as gw, mcp_client(gw.url) as client:
        refused = {
            "knowledge_get_context": ({"query": "q", "persist": True}, "memory:snapshot"),
            "knowledge_propose": (
                {"subject": "s", "predicate": "p", "object": "o"},
                "memory:propose",
            ),
            "knowledge_retract_proposal": ({"fact_key": "f"}, "memory:propose"),
            "knowledge_feedback": (
                {"context_pack_id": "p", "result_ref": "r", "signal": "up"},
                "memory:feedback",
            ),
        }
        for tool, (arguments, scope) in refused.items():
            error = await call_error(client, tool, arguments)
            assert error.code == -32002
            assert without_ids(error.data) == {"code": "unauthorized", "required_scope": scope}
        # Authorization runs before bounds: an out-of-range write is still unauthorized.
        error = await call_error(client, "knowledge_propose", {"subject": ""})
        assert error.data["code"] == "unauthorized"
        # The refused persist call used none of the context budget.
        result = await client.call_tool("knowledge_get_context", {"query": "q"})
        assert result.structured_content["persisted"] is False
        bootstrap = (await client.call_tool("knowledge_bootstrap", {})).structured_content
        granted = {c["class"]: c["granted"] for c in bootstrap["capabilities"]}
        assert granted == {"READ": True, "PROPOSE": False, "FEEDBACK": False, "SNAPSHOT": False}
        assert bootstrap["save_mode"]["auto_propose_allowed"] is False
        assert bootstrap["auth_profile"] == "remote-authenticated"
    assert reported(fakes) == {("authorization.refused", "insufficient_scope"): 5}
