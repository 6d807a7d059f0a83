"""The official MCP conformance suite against the running gateway.

scripts/conformance fails on any scenario outside conformance/baseline.yml and on a
baseline entry that starts passing, so this test pins the exact conformance surface.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_gateway_passes_the_official_conformance_suite(stack, tmp_path: Path):
    assert shutil.which("npm"), "npm is needed to install the pinned conformance suite"
    result = subprocess.run(
        [str(ROOT / "scripts" / "conformance"), stack.mcp_url, str(tmp_path / "results")],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Baseline check passed" in result.stdout
    assert "✓ server-initialize" in result.stdout
    assert "✓ tools-list" in result.stdout
    assert "✓ dns-rebinding-protection" in result.stdout
