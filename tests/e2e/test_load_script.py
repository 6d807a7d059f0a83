"""``scripts/load`` (its module, ``python -m bench.load``, which the script execs after
``scripts/bootstrap``) in its tiny mode against the real authenticated stack: every target
(the gateway's MCP mix and each service's RPC mix) runs a few seconds at a low rate, and
the report carries every field a reader of RELIABILITY.md relies on, with no errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ("gateway", "retrieval", "knowledge", "identity", "snapshot")
SUMMARY_FIELDS = {
    "each_once",
    "target_rate_per_s",
    "duration_s",
    "wall_s",
    "calls",
    "ok",
    "shed",
    "offered_rate_per_s",
    "throughput_ok_per_s",
    "latency_ms",
    "latency_all_ms",
    "errors",
    "error_rate",
    "late_starts",
    "late_start_threshold_ms",
    "late_start_p99_ms",
    "by_operation",
}
REFUSED = 3  # bench.load's exit code for a refused target
PROCESSES = {
    "vera up",
    "identity",
    "knowledge",
    "retrieval",
    "snapshot",
    "gateway (MCP)",
    "api (REST)",
    "postgres (postmaster)",
}


def test_tiny_load_on_every_target_reports_every_field_and_no_errors(auth_stack, tmp_path):
    out = tmp_path / "load.json"
    # The stack's own environment carries its token issuer (VERA_MCP__JWT_SECRET, ...), so
    # the load mints tokens the gateway accepts. Its record stays in the test's folder.
    env = {**auth_stack.env, "VERA_BENCH_RECORDS": str(tmp_path / "records")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.load",
            "--data-dir",
            str(auth_stack.data_dir),
            "--service",
            ",".join(TARGETS),
            "--rate",
            "3",
            "--duration",
            "2",
            "--principals",
            "2",
            "--projects-per-principal",
            "1",
            "--facts-per-project",
            "12",
            "--memory-interval",
            "0.5",
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    kept = json.loads((tmp_path / "records" / "load.json").read_text())
    assert [row[0] for row in kept["tables"][0]["rows"]] == list(report["targets"])

    assert report["world"]["principals"] == 2 and report["world"]["facts"] == 24
    assert set(report["targets"]) == set(TARGETS)
    for name, summary in report["targets"].items():
        assert SUMMARY_FIELDS <= set(summary), name
        # Every operation of the mix ran once before the timed calls, and succeeded.
        assert set(summary["each_once"].values()) == {"ok"}, (name, summary["each_once"])
        assert summary["calls"] > 0, name
        assert (summary["errors"], summary["error_rate"], summary["shed"]) == ({}, 0.0, 0), name
        assert summary["ok"] == summary["calls"], name
        assert set(summary["latency_ms"]) == {"n", "p50", "p95", "p99", "max"}, name
        for op, row in summary["by_operation"].items():
            assert row["errors"] == 0, (name, op)
    assert len(report["targets"]["gateway"]["each_once"]) == 10
    assert len(report["targets"]["knowledge"]["each_once"]) == 6
    assert PROCESSES <= set(report["memory"])
    for process in PROCESSES:
        sampled = report["memory"][process]
        assert sampled["samples"] >= 2 and sampled["peak_mib"] > 0, process


def test_a_target_off_this_machine_is_refused_before_any_call(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "VERA_SERVICES__IDENTITY": "10.0.0.1:50051",
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.load",
            "--external",
            "--url",
            "http://192.0.2.1:8080/mcp",
            "--out",
            str(tmp_path / "load.json"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == REFUSED
    assert "gateway http://192.0.2.1:8080/mcp" in done.stderr
    assert "identity 10.0.0.1:50051" in done.stderr
    assert not (tmp_path / "load.json").exists()
