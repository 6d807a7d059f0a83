"""The chart's alerts and dashboards (monitoring.*): the PrometheusRule passes `promtool
check rules`, and `promtool test rules` on synthetic series shows each alert firing when
its condition holds for its duration and none on a healthy stack. promtool is Debian's
(scripts/promtool installs it). That every metric named here is exported is checked
against a running stack in tests/e2e/test_service_metrics.py."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml
from deploy_manifests import ROOT, manifests, of_kind

PROMTOOL = ROOT / "scripts" / "promtool"
NS = 'namespace="vera"'
MONITORING = {"monitoring": {"prometheusRule": {"enabled": True},
                             "dashboards": {"enabled": True}}}


def rule_groups() -> list[dict]:
    [rule] = of_kind(manifests(MONITORING), "PrometheusRule")
    return rule["spec"]["groups"]


def dashboards() -> list[dict]:
    maps = [m for m in of_kind(manifests(MONITORING), "ConfigMap")
            if m["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    return [json.loads(text) for m in maps for text in m["data"].values()]


def named_metrics() -> set[str]:
    """Every vera_* series a rule or dashboard panel reads (recorded vera:* ones aside)."""
    exprs = [r["expr"] for g in rule_groups() for r in g["rules"]]
    exprs += [t["expr"] for d in dashboards() for p in d["panels"] for t in p["targets"]]
    return {name for expr in exprs for name in re.findall(r"\bvera_[a-z0-9_]+", expr)}


def promtool(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(PROMTOOL), *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_the_rules_pass_promtool_check(tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups()}))
    checked = promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def series(name: str, values: str, **labels: str) -> dict:
    spelled = ", ".join([NS, *(f'{k}="{v}"' for k, v in labels.items())])
    return {"series": f"{name}{{{spelled}}}", "values": values}


# Each alert: the synthetic series that make it fire, when it fires, and its labels.
FIRING = {
    "VeraToolErrorRatioHigh": ([
        series("vera_mcp_tool_calls_total", "0+60x30", tool="t", outcome="error"),
        series("vera_mcp_tool_calls_total", "0+60x30", tool="t", outcome="success"),
    ], "20m", [{"severity": "warning"}]),
    "VeraLatencyBudgetBurning": ([
        series("vera_mcp_tool_duration_seconds_bucket", "0+30x80", tool="t", outcome="success",
               le="1.0"),
        series("vera_mcp_tool_duration_seconds_count", "0+60x80", tool="t", outcome="success"),
    ], "70m", [{"severity": "critical"}]),
    "VeraQuotaRefusalSpike": ([
        series("vera_mcp_quota_refusals_total", "0+600x30", bucket="read", pod="vera-gateway-1"),
    ], "20m", [{"severity": "warning"}]),
    "VeraTargetDown": ([
        series("up", "0x20", pod="vera-retrieval-1", job="retrieval"),
        series("up", "1x20", pod="vera-gateway-1", job="gateway"),
    ], "10m", [{"severity": "critical", "namespace": "vera", "pod": "vera-retrieval-1",
                "job": "retrieval"}]),
    "VeraIndexLagging": ([
        series("vera_retrieval_index_lag_changes", "500x30", pod="vera-retrieval-1"),
        series("vera_retrieval_index_lag_changes", "3x30", pod="vera-retrieval-2"),
    ], "20m", [{"severity": "warning", "pod": "vera-retrieval-1"}]),
    "VeraReviewQueueAgeing": ([
        series("vera_knowledge_proposal_oldest_age_seconds", "300000+60x60", pod="k-1"),
    ], "45m", [{"severity": "info"}]),
    "VeraRankingSwitchedOff": ([
        series("vera_retrieval_rank_switch_offs_total", "0 0 0 1 1 1 1 1", pod="r-1"),
    ], "6m", [{"severity": "warning", "namespace": "vera", "pod": "r-1"}]),
    "VeraDatabasePoolSaturated": ([
        series("vera_db_pool_connections_in_use", "8x30", pod="vera-knowledge-1",
               pool="knowledge"),
        series("vera_db_pool_max_connections", "8x30", pod="vera-knowledge-1",
               pool="knowledge"),
    ], "20m", [{"severity": "warning", "pod": "vera-knowledge-1", "pool": "knowledge"}]),
}

# A healthy stack: calls fast and mostly successful, indexes current, an empty queue.
HEALTHY = [
    series("vera_mcp_tool_calls_total", "0+100x80", tool="t", outcome="success"),
    series("vera_mcp_tool_calls_total", "0+1x80", tool="t", outcome="error"),
    series("vera_mcp_tool_duration_seconds_bucket", "0+100x80", tool="t", outcome="success",
           le="1.0"),
    series("vera_mcp_tool_duration_seconds_count", "0+100x80", tool="t", outcome="success"),
    series("vera_mcp_quota_refusals_total", "0+1x80", bucket="read", pod="g-1"),
    series("up", "1x80", pod="vera-gateway-1", job="gateway"),
    series("vera_retrieval_index_lag_changes", "2x80", pod="r-1"),
    series("vera_knowledge_proposal_oldest_age_seconds", "0x80", pod="k-1"),
    series("vera_retrieval_rank_switch_offs_total", "0x80", pod="r-1"),
    series("vera_db_pool_connections_in_use", "2x80", pod="k-1", pool="knowledge"),
    series("vera_db_pool_max_connections", "8x80", pod="k-1", pool="knowledge"),
]


def test_each_alert_fires_on_its_condition_and_none_on_a_healthy_stack(tmp_path: Path) -> None:
    groups = rule_groups()
    # Annotations are checked (as templates) by `check rules`; here the conditions.
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    alerts = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    assert alerts == set(FIRING)
    tests = [
        {"interval": "1m", "input_series": inputs, "alert_rule_test": [
            {"eval_time": at, "alertname": name,
             "exp_alerts": [{"exp_labels": labels} for labels in expected]},
        ]}
        for name, (inputs, at, expected) in FIRING.items()
    ]
    tests.append({"interval": "1m", "input_series": HEALTHY, "alert_rule_test": [
        {"eval_time": "75m", "alertname": name, "exp_alerts": []} for name in FIRING]})
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(
        {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}))
    tested = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_dashboard_reads_only_vera_series_and_every_panel_has_a_query() -> None:
    [dashboard] = dashboards()
    assert dashboard["uid"] == "vera-overview"
    assert all(panel["targets"] and all(t["expr"] for t in panel["targets"])
               for panel in dashboard["panels"])
    assert "vera_grpc_server_handled_total" in named_metrics()


def test_monitoring_is_off_by_default() -> None:
    objects = manifests({})
    assert not of_kind(objects, "PrometheusRule")
    assert not [m for m in of_kind(objects, "ConfigMap") if "dashboard" in m["metadata"]["name"]]
