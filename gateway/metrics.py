"""Bounded Prometheus metrics for tool calls, served on their own listener
(``vera.observability.metrics_listener``).

Labels are the registered tool name and success/error, nothing else: no principal,
project, query or unknown requested name ever becomes a label. Degraded answers (a
retrieval answered by its lexical leg alone) are counted per tool as well. The registry is
process-local, so run one ASGI worker per process while metrics are enabled.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram

from vera.gateway.schemas import DEGRADED_MODE

OUTCOMES = ("success", "error")


class ToolMetrics:
    def __init__(self, tool_names: Iterable[str], buckets: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        calls = Counter(
            "vera_mcp_tool_calls",
            "MCP tool calls by registered tool and outcome.",
            ("tool", "outcome"),
            registry=self.registry,
        )
        duration = Histogram(
            "vera_mcp_tool_duration_seconds",
            "MCP tool call latency by registered tool and outcome.",
            ("tool", "outcome"),
            registry=self.registry,
        )
        degraded = Counter(
            "vera_mcp_degraded_answers",
            "Answers saying retrieval_mode=lexical_only (the lexical leg alone), by tool; "
            "knowledge_get_context_pack counts reads of packs persisted so.",
            ("tool",),
            registry=self.registry,
        )
        refusals = Counter(
            "vera_mcp_quota_refusals",
            "Tool calls refused because the caller's quota bucket was exhausted, by bucket.",
            ("bucket",),
            registry=self.registry,
        )
        self._refusals = {bucket: refusals.labels(bucket) for bucket in sorted(set(buckets))}
        names = tuple(tool_names)
        # Every series exists from the start, so a scrape shows all tools at once; a call
        # then updates its pair without looking the labels up again.
        self._series = {
            (tool, outcome): (calls.labels(tool, outcome), duration.labels(tool, outcome))
            for tool in names
            for outcome in OUTCOMES
        }
        self._degraded = {tool: degraded.labels(tool) for tool in names}

    def observe(self, tool: str, outcome: str, seconds: float) -> None:
        series = self._series.get((tool, outcome))
        if series is None:
            return  # never let a caller-chosen name become a label
        calls, duration = series
        calls.inc()
        duration.observe(seconds)

    def observe_refusal(self, bucket: str) -> None:
        counter = self._refusals.get(bucket)
        if counter is not None:
            counter.inc()

    def observe_answer(self, tool: str, data: object) -> None:
        """Counts ``data`` (a tool's structured answer) when it says it was degraded."""
        counter = self._degraded.get(tool)
        if counter is not None and isinstance(data, dict):
            if data.get("retrieval_mode") == DEGRADED_MODE:
                counter.inc()
