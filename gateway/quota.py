"""The gateway's per-principal abuse quotas (GUIDE §Quotas): one bucket per tool class,
counted by ``vera.quota``'s fixed windows."""

from __future__ import annotations

from vera.config import McpSettings
from vera.quota import BucketLimit


def limits_from_settings(mcp: McpSettings) -> dict[str, BucketLimit]:
    return {
        "read": BucketLimit(mcp.quota_read_per_minute, 60),
        "context": BucketLimit(mcp.quota_context_per_minute, 60),
        "propose": BucketLimit(mcp.quota_propose_per_minute, 60),
        "feedback": BucketLimit(mcp.quota_feedback_per_minute, 60),
        "snapshot": BucketLimit(mcp.quota_snapshot_per_hour, 3600),
    }
