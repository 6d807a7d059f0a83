"""Issue 39 item 3: in local mode another user of the machine reads and writes nothing
through the MCP gateway. The gateway `vera up` runs asks for a local MCP token, which only
the REST API mints, and only for the data dir's secret (owner-only on disk); the gateway
itself is given a key derived from the secret, never the secret."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from vera.local_secret import local_token_key, secret_path
from vera.mcp_tokens import LOCAL_KEY_ID, TokenKey, mint
from vera.stack.run_files import read_stack_file

pytestmark = pytest.mark.e2e

LISTING = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json",
           "mcp-protocol-version": "2025-06-18"}
NOBODY = 65534


def listing(url: str, token: str | None) -> httpx.Response:
    auth = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.post(url, json=LISTING, headers={**HEADERS, **auth}, timeout=30)


def test_a_call_without_a_local_token_is_refused(stack) -> None:
    refused = listing(stack.mcp_url, None)
    assert refused.status_code == 401
    assert refused.json()["error"]["data"]["code"] == "unauthenticated"
    # Signed with a key derived from another secret: refused just the same.
    forged = mint(TokenKey.local(local_token_key("another data dir's secret")),
                  "00000000-0000-4000-8000-000000000001", ["memory:read"],
                  key_id=LOCAL_KEY_ID, lifetime_seconds=600).token
    assert listing(stack.mcp_url, forged).status_code == 401
    # The token the REST API mints for the data dir's secret is accepted.
    served = listing(stack.mcp_url, stack.mcp_token())
    assert served.status_code == 200 and served.json()["result"]["tools"]


def test_the_gateway_never_holds_the_secret(stack) -> None:
    secret = secret_path(stack.data_dir).read_text().strip()
    info = read_stack_file(stack.data_dir)
    assert info is not None
    environ = Path(f"/proc/{info['pids']['gateway']}/environ").read_bytes()
    assert secret.encode() not in environ
    assert b"VERA_MCP__LOCAL_TOKEN_KEY=" in environ


PROBE = """
import json, sys, urllib.request, urllib.error
secret, url, body, headers = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
try:
    open(secret).read()
    readable = True
except PermissionError:
    readable = False
request = urllib.request.Request(url, data=body.encode(), headers=headers)
try:
    status = urllib.request.urlopen(request, timeout=30).status
except urllib.error.HTTPError as refused:
    status = refused.code
print(json.dumps({"readable": readable, "status": status}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a probe as another uid")
def test_another_user_of_the_machine_can_neither_read_the_secret_nor_call_a_tool(stack) -> None:
    # The system interpreter: the test's own may live under a folder only root can enter.
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    done = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         python, "-I", "-c", PROBE, str(secret_path(stack.data_dir)), stack.mcp_url,
         json.dumps(LISTING), json.dumps(HEADERS)],
        capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"readable": False, "status": 401}
