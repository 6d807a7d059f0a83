"""The SessionStart hook, run for real (``python3 vera_hook.py``) in temporary Git repositories."""

from __future__ import annotations

import ast
import http.server
import json
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from vera.integrations.artifacts import HOOK_TIMEOUT_S, hook_source

CLOSED_URL = "http://127.0.0.1:9"  # discard port: nothing listens
# A hook that hangs is killed here and the test fails. Generous for ordinary runs, so a
# loaded machine's slow start cannot fail them; the hung-Git and hung-VERA tests kill it at
# the runtimes' own limit (HOOK_TIMEOUT_S) instead, as the runtimes do.
HANG_LIMIT_S = 25


@pytest.fixture(scope="module")
def hook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hook") / "vera_hook.py"
    path.write_text(hook_source())
    return path


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    return subprocess.run(
        ["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "alice-secret-home" / "payments"
    (root / "services" / "billing").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "services" / "billing" / "app.py").write_text("SECRET_FILE_CONTENT = 1\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "init")
    git(
        root,
        "remote",
        "add",
        "origin",
        "https://alice:ghp_TOKEN123@GitHub.com/Acme/Payments.git?ref=x#frag",
    )
    return root


def run_hook(
    hook: Path,
    cwd: Path,
    *,
    api_url: str = CLOSED_URL,
    event: object | None = None,
    env: dict[str, str] | None = None,
    runtime: str = "claude-code",
    limit_s: float = HANG_LIMIT_S,
) -> tuple[dict, str]:
    stdin = json.dumps(
        event if event is not None else {"cwd": str(cwd), "hook_event_name": "SessionStart"}
    )
    done = subprocess.run(
        [sys.executable, str(hook), "session-start", "--runtime", runtime, "--api-url", api_url],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=limit_s,
    )
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert set(output) == {"hookSpecificOutput"}
    specific = output["hookSpecificOutput"]
    assert specific["hookEventName"] == "SessionStart"
    return specific, done.stdout


def bootstrap_arguments(context: str) -> dict[str, str]:
    marker = "knowledge_bootstrap arguments: "
    if marker not in context:
        return {}
    return json.loads(context.split(marker, 1)[1])


def status(context: str) -> str:
    return context.split(" vera=", 1)[1].split(" ", 1)[0]


def test_clean_repository_emits_only_tagged_sanitized_bootstrap_arguments(
    hook: Path, repo: Path
) -> None:
    specific, raw = run_hook(hook, repo)
    context = specific["additionalContext"]
    assert context.startswith("[vera-hook session-start] runtime=claude-code ")
    assert bootstrap_arguments(context) == {
        "repository": "github.com/Acme/Payments",
        "branch": "main",
    }
    for leaked in ("ghp_TOKEN123", "alice", "ref=x", "frag", str(repo), "SECRET_FILE_CONTENT"):
        assert leaked not in raw


@pytest.mark.parametrize(
    ("remote", "expected"),
    [
        ("git@github.com:acme/payments.git", "github.com/acme/payments"),
        ("ssh://deploy:pw@git.example.com:2222/team/pay.git", "git.example.com/team/pay"),
        (
            "https://x-access-token:tok@gitlab.example.com/g/p?private_token=abc",
            "gitlab.example.com/g/p",
        ),
    ],
)
def test_credentials_and_query_strings_are_stripped_from_the_remote(
    hook: Path, repo: Path, remote: str, expected: str
) -> None:
    git(repo, "remote", "set-url", "origin", remote)
    specific, raw = run_hook(hook, repo)
    assert bootstrap_arguments(specific["additionalContext"])["repository"] == expected
    for secret in ("pw", "tok@", "abc", "deploy", "2222"):
        assert secret not in raw


@pytest.mark.parametrize(
    "remote", ["/home/alice/src/payments", "file:///home/alice/src/payments", "../payments-mirror"]
)
def test_a_local_path_remote_is_never_sent(hook: Path, repo: Path, remote: str) -> None:
    git(repo, "remote", "set-url", "origin", remote)
    specific, raw = run_hook(hook, repo)
    assert "repository" not in bootstrap_arguments(specific["additionalContext"])
    assert "alice" not in raw and "payments-mirror" not in raw


def test_monorepo_subdirectory_becomes_a_repository_relative_code_path(
    hook: Path, repo: Path
) -> None:
    specific, raw = run_hook(hook, repo / "services" / "billing")
    arguments = bootstrap_arguments(specific["additionalContext"])
    assert arguments["code_path"] == "services/billing"
    assert str(repo) not in raw and "alice-secret-home" not in raw


def test_detached_head_sends_no_branch(hook: Path, repo: Path) -> None:
    git(repo, "checkout", "-q", "--detach", "HEAD")
    specific, _ = run_hook(hook, repo)
    arguments = bootstrap_arguments(specific["additionalContext"])
    assert "branch" not in arguments
    assert arguments["repository"] == "github.com/Acme/Payments"


def test_worktree_shares_the_identity_and_sends_its_own_branch(hook: Path, repo: Path) -> None:
    worktree = repo.parent / "payments-feature"
    git(repo, "worktree", "add", "-q", "-b", "feature/x", str(worktree))
    specific, raw = run_hook(hook, worktree)
    assert bootstrap_arguments(specific["additionalContext"]) == {
        "repository": "github.com/Acme/Payments",
        "branch": "feature/x",
    }
    assert str(worktree) not in raw


def test_branch_change_during_the_session_is_seen_on_the_next_event(hook: Path, repo: Path) -> None:
    first, _ = run_hook(hook, repo)
    git(repo, "checkout", "-q", "-b", "hotfix")
    second, _ = run_hook(hook, repo)  # stateless: nothing cached from the first run
    assert bootstrap_arguments(first["additionalContext"])["branch"] == "main"
    assert bootstrap_arguments(second["additionalContext"])["branch"] == "hotfix"


def test_outside_a_repository_it_still_answers_without_arguments(
    hook: Path, tmp_path: Path
) -> None:
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    specific, _ = run_hook(hook, plain)
    assert bootstrap_arguments(specific["additionalContext"]) == {}


def test_the_prompt_transcript_and_file_contents_are_never_forwarded(
    hook: Path, repo: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text('{"role":"user","content":"TRANSCRIPT_SECRET"}\n')
    event = {
        "cwd": str(repo),
        "prompt": "PROMPT_SECRET refactor billing",
        "transcript_path": str(transcript),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    with probe_server(200) as (url, seen):
        _, raw = run_hook(hook, repo, api_url=url, event=event)
    for secret in ("PROMPT_SECRET", "TRANSCRIPT_SECRET", str(transcript), "SECRET_FILE_CONTENT"):
        assert secret not in raw
        assert all(secret not in request for request in seen)
    # The only network request is a credential-free readiness probe of the API, not MCP.
    assert len(seen) == 1
    request_line, _, headers = seen[0].partition("\r\n")
    assert request_line == "GET /readyz HTTP/1.1"
    assert "authorization" not in headers.lower() and "/mcp" not in seen[0]


@pytest.mark.parametrize("event", ["not json", ["a list"], {"cwd": "/nonexistent/dir"}, {"cwd": 7}])
def test_a_malformed_event_fails_open(hook: Path, repo: Path, event: object) -> None:
    stdin_event = event if not isinstance(event, str) else None
    if isinstance(event, str):
        done = subprocess.run(
            [sys.executable, str(hook), "session-start", "--runtime", "codex"],
            input=event,
            capture_output=True,
            text=True,
            cwd=repo,
            timeout=15,
        )
        assert done.returncode == 0
        assert json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"].startswith(
            "[vera-hook"
        )
        return
    specific, _ = run_hook(hook, repo, event=stdin_event)
    assert bootstrap_arguments(specific["additionalContext"])["branch"] == "main"


def test_bad_arguments_still_fail_open(hook: Path, repo: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(hook), "no-such-event"],
        input="{}",
        capture_output=True,
        text=True,
        cwd=repo,
        timeout=15,
    )
    assert done.returncode == 0
    assert status(json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]) == "degraded"


class _Probe(http.server.BaseHTTPRequestHandler):
    answer = 200
    seen: list[str]

    def do_GET(self) -> None:
        self.seen.append(self.requestline + "\r\n" + str(self.headers))
        self.send_response(self.answer)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


class probe_server:
    def __init__(self, answer: int) -> None:
        self.seen: list[str] = []
        handler = type("Handler", (_Probe,), {"answer": answer, "seen": self.seen})
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)

    def __enter__(self) -> tuple[str, list[str]]:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}", self.seen

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_vera_available_when_the_api_is_ready(hook: Path, repo: Path) -> None:
    with probe_server(200) as (url, _):
        specific, _ = run_hook(hook, repo, api_url=url)
    assert status(specific["additionalContext"]) == "available"


@pytest.mark.parametrize("answer", [503, 500])
def test_vera_not_ready_or_failing_is_reported_degraded(
    hook: Path, repo: Path, answer: int
) -> None:
    with probe_server(answer) as (url, _):
        specific, _ = run_hook(hook, repo, api_url=url)
    assert status(specific["additionalContext"]) == "degraded"
    assert bootstrap_arguments(specific["additionalContext"])["branch"] == "main"


def test_offline_vera_fails_open_and_degraded(hook: Path, repo: Path) -> None:
    specific, _ = run_hook(hook, repo, api_url=CLOSED_URL)
    assert status(specific["additionalContext"]) == "degraded"


@pytest.fixture
def silent_listener() -> Iterator[str]:
    """Accepts connections and never answers: a hung VERA."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def test_the_hook_budget_fits_the_runtimes_timeout() -> None:
    """Every step of the hook takes what is left of ``BUDGET_S``, and the runtime kills a
    hook after ``HOOK_TIMEOUT_S``: the budget must leave the runtime room to spare."""
    tree = ast.parse(hook_source())
    budget = next(
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["BUDGET_S"]
    )
    assert 0 < budget < HOOK_TIMEOUT_S < HANG_LIMIT_S


def test_a_hung_vera_times_out_within_the_hook_budget(
    hook: Path, repo: Path, silent_listener: str
) -> None:
    # Killed at the runtimes' own limit, as Claude Code, Codex and OpenCode would kill it.
    specific, _ = run_hook(hook, repo, api_url=silent_listener, limit_s=HOOK_TIMEOUT_S)
    assert status(specific["additionalContext"]) == "degraded"


def test_a_hung_git_cannot_stall_the_session(
    hook: Path, repo: Path, tmp_path: Path, silent_listener: str
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_git = bin_dir / "git"
    fake_git.write_text("#!/bin/sh\nsleep 30\n")
    fake_git.chmod(fake_git.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    specific, _ = run_hook(hook, repo, api_url=silent_listener, env=env,
                           limit_s=HOOK_TIMEOUT_S)
    assert status(specific["additionalContext"]) == "degraded"
