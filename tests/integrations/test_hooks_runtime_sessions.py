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
import tomlkit
from runtime_fakes import FakeAnthropic, FakeChat, FakeResponses, FakeVera

from vera.integrations.artifacts import render
from vera.integrations.contract import apply_overrides, load_contract

BIN = Path(__file__).resolve().parents[2] / "runtimes" / "node_modules" / ".bin"
TAG = "[vera-hook session-start]"


def runtime_cli(name: str) -> Path:
    path = BIN / name
    # CI installs the CLIs: a missing one is a failure, never a silent skip.
    assert path.exists(), f"{name} is not installed (run scripts/runtimes)"
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
        if artifact.kind == "toml-merge":  # the adapter adds the endpoint to the same table
            data = json.loads(json.dumps(artifact.content))
            data["mcp_servers"]["vera"]["url"] = vera.mcp_url
            path.write_text(tomlkit.dumps(data))
        elif artifact.kind == "json-merge":
            path.write_text(json.dumps(artifact.content, indent=2))
        else:
            path.write_text(str(artifact.content))
    if runtime == "claude-code":
        (root / ".mcp.json").write_text(
            json.dumps({"mcpServers": {"vera": {"type": "http", "url": vera.mcp_url}}})
        )
    return root


def fingerprint(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not {".git", "node_modules"} & set(p.relative_to(root).parts)
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
        stdin=subprocess.DEVNULL,
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


@pytest.fixture
def responses() -> Iterator[FakeResponses]:
    server = FakeResponses()
    yield server
    server.close()


def run_codex(root: Path, tmp_path: Path, model: FakeResponses) -> subprocess.CompletedProcess[str]:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        f"""model = "fake-model"
model_provider = "fake"
[model_providers.fake]
name = "fake"
base_url = "{model.url}/v1"
wire_api = "responses"
env_key = "FAKE_API_KEY"
[projects."{root}"]
trust_level = "trusted"
"""
    )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "CODEX_HOME": str(codex_home),
        "FAKE_API_KEY": "x",
    }
    # Hook hash trust is a user-home review step; one invocation may bypass it for the test.
    return subprocess.run(
        [
            str(runtime_cli("codex")),
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-hook-trust",
            "check our deployment conventions",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def developer_messages(model: FakeResponses) -> list[str]:
    return [
        part.get("text", "")
        for body in model.bodies
        for item in body.get("input", [])
        if isinstance(item, dict)
        and item.get("type") == "message"
        and item.get("role") == "developer"
        for part in item.get("content", [])
    ]


@pytest.mark.parametrize(
    ("mode", "proposal_reaches_vera"), [("off", False), ("suggest", False), ("auto-propose", True)]
)
def test_codex_session_hook_hostile_content_and_save_mode(
    tmp_path: Path, vera: FakeVera, responses: FakeResponses, mode: str, proposal_reaches_vera: bool
) -> None:
    root = project(tmp_path, "codex", mode, vera)
    before = fingerprint(root)
    done = run_codex(root, tmp_path, responses)
    assert done.returncode == 0, done.stderr[-2000:]

    hook_lines = [t for t in developer_messages(responses) if TAG in t]
    assert hook_lines, "SessionStart hook context never reached the model"
    assert "runtime=codex vera=available" in hook_lines[0]
    assert '"repository": "github.com/acme/pay"' in hook_lines[0]
    for body in responses.bodies:
        assert TAG not in json.dumps(body.get("instructions", ""))
        assert "ghp_SECRET" not in json.dumps(body)
    assert {"GET": "/readyz"} in vera.requests

    assert vera.calls[0] == "knowledge_search"
    offered = {
        tool.get("name")
        for body in responses.bodies
        for namespace in body.get("tools", [])
        if namespace.get("name") == "mcp__vera"
        for tool in namespace.get("tools", [])
    }
    assert "knowledge_search" in offered
    assert ("knowledge_propose" in offered) is (mode != "off")  # off: disabled_tools
    assert ("knowledge_propose" in vera.calls) is proposal_reaches_vera
    assert fingerprint(root) == before


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    server = FakeChat()
    yield server
    server.close()


@pytest.fixture(scope="module")
def opencode_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One user home for the module, so OpenCode's caches are filled once."""
    return tmp_path_factory.mktemp("opencode-home")


def opencode_env(home: Path) -> dict[str, str]:
    xdg = {
        name: str(home / name)
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME")
    }
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        **xdg,
    }


# OpenCode writes these into any .opencode folder itself (its plugin SDK, installed from
# npm); they are neither VERA's nor the user's. VERA writes no .opencode folder.
OPENCODE_OWNED = ("node_modules", ".gitignore", "package.json", "package-lock.json", "bun.lock")


@pytest.fixture(scope="module")
def opencode_plugin_sdk(opencode_home: Path) -> Iterator[Path]:
    """OpenCode's own first start for this user home, done once in a scratch project with a
    plugin of its own (OpenCode installs its plugin SDK into the user's config folder and
    the project's .opencode; both are slow on a fresh machine, and a session racing them can
    drop the MCP server). VERA's files need no install of their own."""
    scratch = opencode_home / "scratch-project"
    (scratch / ".opencode" / "plugins").mkdir(parents=True)
    git(scratch, "init", "-q")
    (scratch / ".opencode" / "plugins" / "noop.js").write_text(
        "export const N = async () => ({});\n"
    )
    vera, chat = FakeVera(), FakeChat()
    try:
        (scratch / "opencode.json").write_text(json.dumps(opencode_test_config(vera, chat)))
        offered = opencode_session(scratch, opencode_home, vera, chat)
        assert "vera_knowledge_search" in offered, mcp_trace(vera)
    finally:
        vera.close()
        chat.close()
    yield scratch / ".opencode"


def opencode_session(root: Path, home: Path, vera: FakeVera, chat: FakeChat) -> set[str]:
    """One ``opencode run``, retried while OpenCode starts without the MCP server (seen on
    fresh CI machines while its first session sets up; the fakes answer each request on its
    own, so a retry starts from the same state). Returns the tool names the model saw."""
    offered: set[str] = set()
    for _ in range(3):
        chat.bodies.clear()
        vera.requests.clear()
        vera.calls.clear()
        done = subprocess.run(
            [str(runtime_cli("opencode")), "run", "check our deployment conventions"],
            cwd=root,
            env=opencode_env(home),
            capture_output=True,
            text=True,
            timeout=180,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        offered = {t["function"]["name"] for b in chat.bodies for t in b.get("tools", [])}
        if "vera_knowledge_search" in offered:
            break
    return offered


def mcp_trace(vera: FakeVera) -> str:
    """What OpenCode asked the MCP endpoint, for a failure message."""
    return "MCP requests seen: " + json.dumps(
        [r.get("GET") or (r.get("body") or {}).get("method") for r in vera.requests]
    )


def opencode_test_config(vera: FakeVera, model: FakeChat) -> dict[str, object]:
    """The test provider and endpoint that sit next to VERA's rules."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "model": "fake/m",
        "provider": {
            "fake": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Fake",
                "options": {"baseURL": model.url + "/v1", "apiKey": "x"},
                "models": {"m": {"name": "m", "tool_call": True}},
            }
        },
        # A generous tool-listing timeout (ms): a loaded machine must not drop the server.
        "mcp": {
            "vera": {
                "type": "remote",
                "url": vera.mcp_url,
                "enabled": True,
                "oauth": False,
                "timeout": 30000,
            }
        },
    }


def configure_opencode(root: Path, vera: FakeVera, model: FakeChat) -> None:
    """The test provider and endpoint next to VERA's rules."""
    # OpenCode inserts "$schema" into a config that lacks it; a real project has it.
    config: dict[str, object] = {"$schema": "https://opencode.ai/config.json"}
    config.update(json.loads((root / "opencode.json").read_text()))
    config.update(opencode_test_config(vera, model))
    (root / "opencode.json").write_text(json.dumps(config, indent=2))


@pytest.mark.parametrize(
    ("mode", "proposal_reaches_vera"), [("off", False), ("suggest", False), ("auto-propose", True)]
)
def test_opencode_session_plugin_hostile_content_and_save_mode(
    tmp_path: Path,
    opencode_home: Path,
    opencode_plugin_sdk: Path,
    vera: FakeVera,
    chat: FakeChat,
    mode: str,
    proposal_reaches_vera: bool,
) -> None:
    root = project(tmp_path, "opencode", mode, vera)
    configure_opencode(root, vera, chat)
    before = fingerprint(root)
    offered = opencode_session(root, opencode_home, vera, chat)
    assert "vera_knowledge_search" in offered, mcp_trace(vera)

    user_texts = [
        json.dumps(message.get("content"))
        for body in chat.bodies
        for message in body.get("messages", [])
        if message.get("role") == "user"
    ]
    hook_texts = [text for text in user_texts if TAG in text]
    assert hook_texts, "the chat.message plugin never added the hook line"
    assert "runtime=opencode vera=available" in hook_texts[0]
    for body in chat.bodies:
        system = [m for m in body.get("messages", []) if m.get("role") == "system"]
        assert TAG not in json.dumps(system)
        assert "ghp_SECRET" not in json.dumps(body)
    assert {"GET": "/readyz"} in vera.requests

    assert ("vera_knowledge_propose" in offered) is (mode != "off")  # deny: not offered
    assert vera.calls[0] == "knowledge_search"
    assert ("knowledge_propose" in vera.calls) is proposal_reaches_vera
    assert without_opencode_owned(fingerprint(root)) == without_opencode_owned(before)


def without_opencode_owned(files: dict[str, str]) -> dict[str, str]:
    return {
        path: digest
        for path, digest in files.items()
        if not (path.startswith(".opencode/") and path.split("/")[1] in OPENCODE_OWNED)
    }
