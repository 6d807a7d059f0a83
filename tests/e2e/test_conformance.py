"""The official MCP conformance suite against the running gateway.

scripts/conformance fails on any scenario outside conformance/baseline.yml and on a
baseline entry that starts passing, so this test pins the exact conformance surface.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from harness import bearer_proxy

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_gateway_passes_the_official_conformance_suite(stack, tmp_path: Path):
    assert shutil.which("npm"), "npm is needed to install the pinned conformance suite"
    # The suite sends no credential of its own: the proxy adds the stack's local token and
    # passes everything else (Host and Origin too) as the suite sent it.
    gateway = stack.mcp_url.removesuffix("/mcp")
    with bearer_proxy(gateway, stack.mcp_token()) as proxy:
        result = subprocess.run(
            [str(ROOT / "scripts" / "conformance"), f"{proxy}/mcp", str(tmp_path / "results")],
            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Baseline check passed" in result.stdout
    assert "✓ server-initialize" in result.stdout
    assert "✓ tools-list" in result.stdout
    assert "✓ dns-rebinding-protection" in result.stdout
