"""Third-party MCP clients against the running stack: the MCP Inspector's CLI and the
TypeScript SDK's Streamable HTTP client, both pinned in conformance/package.json and installed
(once, cached in conformance/node_modules) by scripts/conformance."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "conformance"
INSPECTOR = PACKAGES / "node_modules/@modelcontextprotocol/inspector/cli/build/cli.js"
FACT = {"type": "fact", "subject": "checkout-api", "predicate": "written_in",
        "object": "Kotlin on the JVM"}


@pytest.fixture(scope="module")
def node() -> Path:
    installed = subprocess.run([str(ROOT / "scripts" / "conformance"), "--node"],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-2000:]
    return Path(installed.stdout.strip())


@pytest.fixture(scope="module")
def seeded(stack, tmp_path_factory: pytest.TempPathFactory):
    records = tmp_path_factory.mktemp("third-party") / "checkout.jsonl"
    records.write_text(json.dumps(FACT) + "\n")
    loaded = stack.vera("ingest", str(records), "--project", "checkout", "--data-dir",
                        str(stack.data_dir))
    assert loaded.returncode == 0, loaded.stderr
    return stack


def run_node(node: Path, *args: str) -> dict:
    # The Inspector starts its CLI as a `node` child, so Node 22 goes first on PATH.
    env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run([str(node), *args], capture_output=True, text=True, timeout=60,
                            env=env, cwd=PACKAGES)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return json.loads(result.stdout)


def inspector(node: Path, stack, *args: str) -> dict:
    """The Inspector's CLI on the stack, with its local MCP token as a header."""
    return run_node(node, str(INSPECTOR), "--cli", stack.mcp_url, "--transport", "http",
                    "--header", f"Authorization: Bearer {stack.mcp_token()}", *args)


def test_inspector_cli_lists_the_tools(node, seeded):
    listed = inspector(node, seeded, "--method", "tools/list")
    names = {tool["name"] for tool in listed["tools"]}
    assert len(names) == 10
    assert {"knowledge_get_context", "knowledge_search", "knowledge_bootstrap"} <= names


def test_inspector_cli_calls_get_context(node, seeded):
    called = inspector(node, seeded, "--method", "tools/call",
                       "--tool-name", "knowledge_get_context",
                       "--tool-arg", "query=what language is checkout-api written in?",
                       "--tool-arg", "project=checkout")
    assert not called.get("isError", False), called
    results = called["structuredContent"]["results"]
    assert [(r["subject"], r["object"]) for r in results][:1] == [
        ("checkout-api", "Kotlin on the JVM")]


def test_typescript_sdk_client_lists_searches_and_gets_a_structured_error(node, seeded):
    report = run_node(node, str(PACKAGES / "sdk-client.mjs"), seeded.mcp_url,
                      "what language is checkout-api written in?", "checkout",
                      seeded.mcp_token())
    assert len(report["tools"]) == 10 and "knowledge_search" in report["tools"]
    assert report["search"]["isError"] is False
    assert report["search"]["structuredContent"]["results"][0]["object"] == "Kotlin on the JVM"
    assert report["badInput"]["code"] == -32602
    assert report["badInput"]["data"]["code"] == "invalid_input"
    assert report["badInput"]["data"]["field"] == "query"
