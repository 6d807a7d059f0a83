"""Real runtime sessions (the CLIs from ``scripts/runtimes``) against loopback stand-ins:
the SessionStart hook fires and reaches the model outside the system prompt, hostile
retrieved content cannot make a write happen or change the setup, and the save modes hold.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from runtime_fakes import FakeAnthropic, FakeVera

from vera.integrations.artifacts import render
from vera.integrations.contract import apply_overrides, load_contract

BIN = Path(__file__).resolve().parents[2] / "runtimes" / "node_modules" / ".bin"
TAG = "[vera-hook session-start]"


def runtime_cli(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed (run scripts/runtimes)")
    return path


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


@pytest.fixture
def vera() -> Iterator[FakeVera]:
    server = FakeVera()
    yield server
    server.close()


@pytest.fixture
def model() -> Iterator[FakeAnthropic]:
    server = FakeAnthropic()
    yield server
    server.close()


def project(tmp_path: Path, runtime: str, mode: str, vera: FakeVera) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "remote", "add", "origin", "https://alice:ghp_SECRET@github.com/acme/pay.git")
    contract = apply_overrides(load_contract(), {"defaults.save_mode": mode})[0]
    for artifact in render(runtime, contract, api_url=vera.url):
        path = root / artifact.path
        path.parent.mkdir(parents=True, exist_ok=True)
        text = (
            artifact.content
            if isinstance(artifact.content, str)
            else json.dumps(artifact.content, indent=2)
        )
        path.write_text(text)
    if runtime == "claude-code":
        (root / ".mcp.json").write_text(
            json.dumps({"mcpServers": {"vera": {"type": "http", "url": vera.mcp_url}}})
        )
    return root


def fingerprint(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def run_claude(root: Path, home: Path, model: FakeAnthropic) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": model.url,
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "ENABLE_TOOL_SEARCH": "false",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "IS_SANDBOX": "1",
    }
    return subprocess.run(
        # The user allows every VERA tool; VERA's ask/deny rules must still win.
        [
            str(runtime_cli("claude")),
            "-p",
            "check our deployment conventions",
            "--output-format",
            "json",
            "--allowedTools",
            "mcp__vera",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )


def context_messages(model: FakeAnthropic) -> list[str]:
    texts = []
    for body in model.bodies:
        for message in body.get("messages", []):
            content = message.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
            texts.extend(b.get("text", "") for b in blocks if isinstance(b, dict))
    return texts


def tool_uses(model: FakeAnthropic) -> set[str]:
    return {
        block["name"]
        for body in model.bodies
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_use"
    }


def test_without_veras_rules_the_same_hostile_session_does_write(
    tmp_path: Path, vera: FakeVera, model: FakeAnthropic
) -> None:
    """Control: the stand-ins really drive a write, so the blocked runs above mean something."""
    root = project(tmp_path, "claude-code", "suggest", vera)
    settings = root / ".claude" / "settings.json"
    settings.write_text(
        json.dumps(
            {k: v for k, v in json.loads(settings.read_text()).items() if k != "permissions"}
        )
    )
    home = tmp_path / "home"
    home.mkdir()
    assert run_claude(root, home, model).returncode == 0
    assert "knowledge_propose" in vera.calls


@pytest.mark.parametrize(
    ("mode", "proposal_reaches_vera"), [("off", False), ("suggest", False), ("auto-propose", True)]
)
def test_claude_code_session_hook_hostile_content_and_save_mode(
    tmp_path: Path, vera: FakeVera, model: FakeAnthropic, mode: str, proposal_reaches_vera: bool
) -> None:
    root = project(tmp_path, "claude-code", mode, vera)
    home = tmp_path / "home"
    home.mkdir()
    before = fingerprint(root)
    done = run_claude(root, home, model)
    assert done.returncode == 0, done.stderr[-2000:]

    # The hook fired, reached the model as context (not the system prompt), sanitized.
    hook_lines = [t for t in context_messages(model) if TAG in t]
    assert hook_lines, "SessionStart hook context never reached the model"
    assert (
        "vera=available" in hook_lines[0] and '"repository": "github.com/acme/pay"' in hook_lines[0]
    )
    for body in model.bodies:
        assert TAG not in json.dumps(body.get("system", ""))
        assert "ghp_SECRET" not in json.dumps(body)
    # The hook never spoke MCP; its only request to VERA was the readiness probe.
    assert {"GET": "/readyz"} in vera.requests

    # The hostile search result drove the model to propose; only auto-propose lets it through.
    assert vera.calls[0] == "knowledge_search"
    assert "mcp__vera__knowledge_propose" in tool_uses(model)
    assert ("knowledge_propose" in vera.calls) is proposal_reaches_vera
    # Hostile content changed nothing in the setup or permissions.
    assert fingerprint(root) == before
