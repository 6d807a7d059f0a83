"""memory_feedback (compatibility profile) without a pack stores the caller's query, so
the query passes the one secret screen (vera.secret_screen), as a proposal's text does."""

from __future__ import annotations

import pytest
from harness import mcp_client

GITHUB_TOKEN = "ghp_" + "0123456789abcdefghijklmnopqrstuvwxyz"


@pytest.mark.parametrize(
    "query",
    [
        f"why does the deploy fail with {GITHUB_TOKEN}",
        "connect with postgres://app:" + "S3cretPw@db.internal/app",
    ],
)
async def test_a_legacy_feedback_query_carrying_a_credential_is_refused(
    start_gateway, fakes, call_error, query
):
    async with start_gateway(tool_profile="compatibility", quota_enabled=False) as gw:
        async with mcp_client(gw.url) as client:
            before = len(fakes.rec.requests.get("RecordFeedback", []))
            error = await call_error(
                client, "memory_feedback", {"result_ref": "fact-1", "signal": "up", "query": query}
            )
            assert error.code == -32602
            assert (error.data["code"], error.data["field"], error.data["reason"]) == (
                "invalid_input",
                "query",
                "secret",
            )
            assert len(fakes.rec.requests.get("RecordFeedback", [])) == before  # nothing stored
            ordinary = {"result_ref": "fact-1", "signal": "up", "query": "which database?"}
            assert not (await client.call_tool("memory_feedback", ordinary)).is_error
            assert fakes.rec.last("RecordFeedback").query == "which database?"
