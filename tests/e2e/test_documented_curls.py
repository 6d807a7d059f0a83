"""Every `curl` the documents show runs, as written, against an authenticated `vera up`
(issue 41: docs/integrations.md's registration `curl` got 415), or, when it shows the
data dir's `local.secret`, against a local `vera up` on the default data dir of the
reader's home. The lines are extracted from README.md and docs/*.md in order; the shell
variables they use are what a reader has set by then (the API's URL, the administrator's
header, the ids earlier lines printed)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import AUTH_AUDIENCE, AUTH_ISSUER, AUTH_SECRET

from vera.stack.launcher import launch, launch_env
from vera.stack.run_files import read_stack_file

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CURL = re.compile(r"(?<![\w-])curl\s[^`]*")


def documented_curls() -> list[tuple[str, str]]:
    """(document, command) for each curl, continuation lines joined, comments dropped."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"\\\n\s*", " ", path.read_text())
        for line in text.splitlines():
            match = CURL.search(line.split("  # ")[0])
            if match:
                found.append((path.relative_to(ROOT).as_posix(), match.group(0).strip()))
    return found


def run(command: str, shell: dict[str, str]) -> tuple[int, str, str]:
    """The command's exit status, HTTP status and body."""
    done = subprocess.run(["bash", "-c", f"{command} -w '\\n%{{http_code}}'"],
                          env=shell, capture_output=True, text=True, timeout=60)
    body, _, status = done.stdout.rpartition("\n")
    return done.returncode, status, body


def is_local(command: str) -> bool:
    return "local.secret" in command


def test_every_documented_local_curl_runs_against_a_local_stack(tmp_path: Path) -> None:
    curls = [c for c in documented_curls() if is_local(c[1])]
    assert curls
    home = tmp_path / "home"
    data_dir = home / ".local" / "share" / "vera"
    data_dir.parent.mkdir(parents=True)
    with launch(data_dir, launch_env(data_dir)) as stack:
        shell = {"PATH": os.environ["PATH"], "HOME": str(home), "API": stack.api_url}
        for document, command in curls:
            code, status, body = run(command, shell)
            assert code == 0 and status.startswith("2"), (document, command, status, body)
            assert json.loads(body)


def test_every_documented_curl_runs_against_an_authenticated_stack(tmp_path: Path) -> None:
    curls = [c for c in documented_curls() if not is_local(c[1])]
    assert len(curls) >= 6
    data_dir = tmp_path / "data"
    env = launch_env(data_dir, VERA_MCP__JWT_SECRET=AUTH_SECRET,
                     VERA_MCP__AUTH_ISSUER=AUTH_ISSUER, VERA_MCP__AUTH_AUDIENCE=AUTH_AUDIENCE,
                     VERA_API__OPEN_REGISTRATION="true")
    with launch(data_dir, env) as stack:
        created = stack.vera("admin", "create-user", "--name", "root", "--admin",
                             "--data-dir", str(data_dir))
        assert created.returncode == 0, created.stderr
        root = next(line.split(":", 1)[1].strip() for line in created.stdout.splitlines()
                    if line.startswith("api_key"))
        api = read_stack_file(data_dir)["api_url"]  # type: ignore[index]
        shell = {"PATH": env["PATH"], "API": api, "VERA_API_URL": api,
                 "ROOT": f"Authorization: Bearer {root}"}
        for document, command in curls:
            code, status, body = run(command, shell)
            assert code == 0 and status.startswith("2"), (document, command, status, body)
            answer = json.loads(body)
            # What the reader notes for the next lines ($WS, $CAROL).
            if "workspace_id" in answer and "WS" not in shell:
                shell["WS"] = answer["workspace_id"]
            if answer.get("display_name") == "carol":
                shell["CAROL"] = answer["principal_id"]
